"""The CTC prefix beam search with its state in an object, so it can be fed an utterance chunk by chunk.

pyctcdecode 0.5 runs its search over a whole utterance in one call (`BeamSearchDecoderCTC._decode_logits`). A
stream needs the same search advanced as audio arrives, so that at the end of an utterance only the last chunk's
frames and the end-of-sentence LM score remain, so the final transcript's latency does not grow with the
utterance. `PrefixSearch` is that loop, taken from pyctcdecode 0.5's `_decode_logits` (Apache-2.0) with its state
(beams, LM score caches) kept between calls. It scores with pyctcdecode's own parts (its KenLM wrapper and
`_get_lm_beams`, beam merging, history pruning, its log-softmax and clipping of each frame), so a search fed all of
an utterance's frames at once, or in any chunking, gives what `decode` / `decode_beams` give on the whole
(tests/test_decode.py checks both against pyctcdecode itself).

Two changes from pyctcdecode's loop, neither of which changes a transcript:
- each frame carries its index in the model's output (`frame_ids`), so words' frame spans count model frames even
  after `prune.candidate_frames` dropped repeated frames;
- after each chunk the LM score caches keep only what the live beams can still extend, so a stream's memory is
  bounded by the beam, not by the length of the utterance.
"""

from __future__ import annotations

import numpy as np
from pyctcdecode.alphabet import BPE_TOKEN
from pyctcdecode.constants import DEFAULT_HOTWORD_WEIGHT, MIN_TOKEN_CLIP_P
from pyctcdecode.decoder import (EMPTY_START_BEAM, NULL_FRAMES, _log_softmax, _merge_beams, _merge_tokens,
                                 _normalize_whitespace, _prune_history, _sort_and_trim_beams)
from pyctcdecode.language_model import HotwordScorer

CLIP_LOGP = float(np.log(MIN_TOKEN_CLIP_P))  # pyctcdecode's floor for a log-probability, log(1e-15)
BEAM_BYTES = 256  # a rough size of one beam's tuple, strings and lists (for `nbytes`), besides its text
# What one frame can add to one beam by `nbytes`' count: a character of text, one word's frame span.
STEP_BYTES = 40


class PrefixSearch:
    """One utterance's beam search: `advance` it with frames, read `best` at any time, `finish` once at the end."""

    def __init__(self, ctc, beam_width: int, beam_prune_logp: float, token_min_logp: float,
                 prune_history: bool = True, hotword_scorer: HotwordScorer | None = None):
        """
        Args:
            ctc: a `pyctcdecode.BeamSearchDecoderCTC` (its labels, LM, alpha and beta).
            beam_width: beams kept after each frame.
            beam_prune_logp: beams this far (nats) below the best are dropped after each frame.
            token_min_logp: a frame's tokens under this are skipped, except its best.
            prune_history: keep one beam of those the LM can't tell apart any more (what `decode` does; off for
                n-best lists, as in `decode_beams`).
            hotword_scorer: pyctcdecode's hotword scorer; None: no hotwords.
        """
        self.ctc = ctc
        self.beam_width = beam_width
        self.beam_prune_logp = beam_prune_logp
        self.token_min_logp = token_min_logp
        self.prune_history = prune_history
        self.hotwords = hotword_scorer or HotwordScorer.build_scorer(None, weight=DEFAULT_HOTWORD_WEIGHT)
        self._lm = ctc._language_model
        start = None if self._lm is None else self._lm.get_start_state()
        self._lm_scores = {("", False): (0.0, 0.0, start)}  # (text, end of sentence) -> (score, raw score, state)
        self._part_scores: dict[str, float] = {}  # partial word -> its score
        self._lm_order = 1 if self._lm is None else self._lm.order
        self.beams = [EMPTY_START_BEAM]
        self._force_next_break = False
        self.frames = 0  # frames advanced over
        self.done = False

    def advance(self, log_probs: np.ndarray, frame_ids=None, stop=None) -> None:
        """Extend the beams over `(frames, vocab)` candidate log-probabilities (dropped tokens -inf).

        Args:
            log_probs: the frames, in order; each is log-softmax normalized and clipped as pyctcdecode does.
            frame_ids: each frame's index in the model's output (None: counted from 0 over all calls).
            stop: called before each frame; what it raises ends the search there (a server's request whose client
                is gone, or whose deadline passed). None: never.
        """
        if self.done:
            raise ValueError("this search is finished; start a new one for the next utterance")
        if len(log_probs) == 0:
            return
        logits = np.clip(_log_softmax(np.asarray(log_probs), axis=1), CLIP_LOGP, 0)
        ids = range(self.frames, self.frames + len(logits)) if frame_ids is None else frame_ids
        for frame_idx, logit_col in zip(ids, logits):
            if stop is not None:
                stop()
            self._frame(int(frame_idx), logit_col)
        self.frames += len(logits)
        live = {(b[0], False) for b in self.beams} | {("", False)}
        self._lm_scores = {k: v for k, v in self._lm_scores.items() if k in live}
        parts = {b[2] for b in self.beams}
        self._part_scores = {k: v for k, v in self._part_scores.items() if k in parts}

    def _frame(self, frame_idx: int, logit_col: np.ndarray) -> None:
        # pyctcdecode 0.5, BeamSearchDecoderCTC._decode_logits: the body of its loop over frames, unchanged.
        idx2vocab, is_bpe, beams = self.ctc._idx2vocab, self.ctc._is_bpe, self.beams
        max_idx = logit_col.argmax()
        idx_list = set(np.where(logit_col >= self.token_min_logp)[0]) | {max_idx}
        new_beams = []
        for idx_char in idx_list:
            p_char = logit_col[idx_char]
            char = idx2vocab[idx_char]
            for text, next_word, word_part, last_char, text_frames, part_frames, logit_score in beams:
                if char == "" or last_char == char:  # blank, or the same token again
                    new_part_frames = part_frames if char == "" else (part_frames[0], frame_idx + 1)
                    new_beams.append((text, next_word, word_part, char, text_frames, new_part_frames,
                                      logit_score + p_char))
                elif is_bpe and (char[:1] == BPE_TOKEN or self._force_next_break):  # a word starts (char LM)
                    self._force_next_break = False
                    clean_char = char
                    if char[:1] == BPE_TOKEN:
                        clean_char = clean_char[1:]
                    if char[-1:] == BPE_TOKEN:
                        clean_char = clean_char[:-1]
                        self._force_next_break = True
                    new_frame_list = text_frames if word_part == "" else text_frames + [part_frames]
                    new_beams.append((text, word_part, clean_char, char, new_frame_list, (frame_idx, frame_idx + 1),
                                      logit_score + p_char))
                elif not is_bpe and char == " ":  # a word ends
                    new_frame_list = text_frames if word_part == "" else text_frames + [part_frames]
                    new_beams.append((text, word_part, "", char, new_frame_list, NULL_FRAMES, logit_score + p_char))
                else:  # the word goes on
                    new_part_frames = ((frame_idx, frame_idx + 1) if part_frames[0] < 0
                                       else (part_frames[0], frame_idx + 1))
                    new_beams.append((text, next_word, word_part + char, char, text_frames, new_part_frames,
                                      logit_score + p_char))
        scored = self.ctc._get_lm_beams(_merge_beams(new_beams), self.hotwords, self._lm_scores, self._part_scores)
        trimmed = self._prune(scored)
        self.beams = (_prune_history(trimmed, lm_order=self._lm_order) if self.prune_history
                      else [b[:-1] for b in trimmed])

    def _prune(self, scored: list) -> list:
        max_score = max(b[-1] for b in scored)
        return _sort_and_trim_beams([b for b in scored if b[-1] >= max_score + self.beam_prune_logp], self.beam_width)

    @property
    def best(self) -> str:
        """The best beam's text so far, its partial last word included (no end-of-sentence score yet)."""
        text, _, word_part = self.beams[0][:3]
        return _normalize_whitespace(_merge_tokens(text, word_part))

    @property
    def fixed_bytes(self) -> int:
        """What `nbytes` counts at most for the beams and caches themselves, besides their texts and frame lists:
        `beam_width` beams, and at most `beam_width` + 1 LM scores and `beam_width` partial-word scores."""
        return BEAM_BYTES * (3 * self.beam_width + 1)

    @property
    def nbytes(self) -> int:
        """A rough size of the search's state: its beams and LM score caches."""
        beams = sum(BEAM_BYTES + len(b[0]) + len(b[2]) + 32 * len(b[4]) for b in self.beams)
        return beams + BEAM_BYTES * (len(self._lm_scores) + len(self._part_scores))

    def finish(self) -> list[tuple]:
        """End the utterance: score the last words with the end of sentence and return the beams, best first, as
        `decode_beams` does: `(text, lm_state, [(word, (start_frame, end_frame)), ...], logit_score, score)`."""
        if self.done:
            raise ValueError("this search is finished already")
        self.done = True
        new_beams = []
        for text, _, word_part, _, frame_list, frames, logit_score in self.beams:
            new_token_times = frame_list if word_part == "" else frame_list + [frames]
            new_beams.append((text, word_part, "", None, new_token_times, (-1, -1), logit_score))
        scored = self.ctc._get_lm_beams(_merge_beams(new_beams), self.hotwords, self._lm_scores, self._part_scores,
                                        is_eos=True)
        return [(_normalize_whitespace(text),
                 self._lm_scores[(text, True)][-1] if (text, True) in self._lm_scores else None,
                 list(zip(text.split(), text_frames)), logit_score, combined_score)
                for text, _, _, _, text_frames, _, logit_score, combined_score in self._prune(scored)]


__all__ = ["PrefixSearch"]
