// ds2-demo's page: push-to-talk microphone and file upload over one WebSocket (protocol: serving/demo_session.py).
// The server's hello names the mode its model allows: "streaming" (partial transcripts while the button is held)
// or "offline" (a bidirectional model: push to talk, the whole utterance transcribed when the button is
// released). The page sends the audio the same way in both, 100 ms at a time as it is recorded. When the hello
// says "words", a final transcript's words come with their times and confidences: the page shades each word by
// its confidence, gives its times in a tooltip, and for an uploaded file plays the file from a word clicked.
"use strict";

const CHUNK_MS = 100; // audio per WebSocket message
const IDLE_CLOSE_CODE = 4408; // the server closed a connection that sent nothing for a while (serving/demo_session.py)
const BUSY_CLOSE_CODE = 1013; // the server has no room for this connection ("try again later")
const LOW_CONFIDENCE = 0.5; // words below it are underlined too: less likely right than wrong
const $ = (id) => document.getElementById(id);
const ui = {
  model: $("model"), error: $("error"), talk: $("talk"), talkLabel: $("talk-label"), file: $("file"),
  transcript: $("transcript"), latency: $("latency"), serverLatency: $("server-latency"), rtf: $("rtf"),
  audio: $("audio"), decoder: $("decoder"), mode: $("mode"), how: $("how"), level: $("level"),
  wordsNote: $("words-note"), player: $("player"),
};
// What the page is doing, for people and for the browser test: connecting, ready, recording, finishing, error,
// idle (the server closed the unused connection; the button or a file reconnects).
// `partials` holds the current utterance's partial messages ({text, audio_seconds}), `finals` every final one,
// `levels` the peak level (0-1) of each chunk the microphone sent in the current utterance; `words` whether the
// server's finals carry words (its hello); `source` the current utterance's: "mic" or "file".
const demo = (window.ds2Demo = { state: "connecting", mode: "streaming", maxSeconds: 0, partials: [], finals: [],
  errors: [], levels: [], recordedSamples: 0, sampleRate: 16000, words: false, source: "mic" });

let ws = null;
let opened = false;
let audioContext = null;
let worklet = null;
let micStream = null;
let pressed = false; // the button (or space bar) is held
let recording = false; // microphone chunks go to the server
let flushing = false; // the worklet's last chunk is on its way
let releasedAt = 0;
let fileUrl = null; // the uploaded file, for the player

function setState(state) {
  demo.state = state;
  document.body.dataset.state = state;
  const usable = state === "ready" || state === "idle";
  ui.talk.disabled = !usable && state !== "recording";
  ui.file.disabled = !usable;
  ui.talk.setAttribute("aria-pressed", state === "recording" ? "true" : "false");
  const offline = demo.mode === "offline";
  ui.talkLabel.textContent = state === "recording" ? (offline ? "Recording… release to transcribe"
    : "Listening… release to finish")
    : state === "finishing" ? (offline ? "Transcribing…" : "Finishing…") : state === "idle" ? "Reconnect"
    : "Hold to talk";
}

function showError(code, message) {
  demo.errors.push({ code, message });
  ui.error.hidden = false;
  ui.error.dataset.code = code;
  ui.error.textContent = message;
}

function clearError() {
  ui.error.hidden = true;
  ui.error.textContent = "";
  delete ui.error.dataset.code;
}

function showTranscript(text, state) {
  ui.transcript.textContent = text;
  ui.transcript.dataset.state = state;
  ui.wordsNote.hidden = true;
}

// A final transcript with its words: each word a <span> in the text (which still reads, and copies, as plain
// text), shaded by its confidence, its times and confidence in its tooltip. For an uploaded file, a word is a
// button that plays the file from the word's start.
function showWords(text, words) {
  const seekable = demo.source === "file" && fileUrl !== null;
  const parts = [];
  let at = 0;
  for (const word of words) {
    const found = text.indexOf(word.word, at);
    if (found < 0) return false; // not the transcript's words: show the plain text
    parts.push(text.slice(at, found), wordSpan(word, seekable));
    at = found + word.word.length;
  }
  parts.push(text.slice(at));
  ui.transcript.replaceChildren(...parts);
  ui.transcript.dataset.state = "final";
  ui.wordsNote.textContent = "Lighter words are less certain (underlined: under " +
    `${100 * LOW_CONFIDENCE}%); a word's tooltip gives its time and confidence` +
    (seekable ? "; click a word (or press Enter on it) to play the file from there." : ".");
  ui.wordsNote.hidden = false;
  return true;
}

function wordSpan(word, seekable) {
  const span = document.createElement("span");
  span.className = "word";
  span.textContent = word.word;
  span.dataset.start = word.start;
  span.dataset.end = word.end;
  span.dataset.confidence = word.confidence;
  span.dataset.level = word.confidence < LOW_CONFIDENCE ? "low" : "high";
  span.style.setProperty("--confidence", word.confidence);
  span.title = `${word.start.toFixed(2)}–${word.end.toFixed(2)} s, confidence ${Math.round(100 * word.confidence)}%`;
  if (seekable) {
    span.setAttribute("role", "button");
    span.tabIndex = 0;
    span.addEventListener("click", () => playFrom(word.start));
    span.addEventListener("keydown", (e) => {
      if (e.key !== "Enter" && e.key !== " ") return;
      e.preventDefault();
      e.stopPropagation(); // the space bar plays the word here, it doesn't start recording
      playFrom(word.start);
    });
  }
  return span;
}

function playFrom(seconds) {
  ui.player.currentTime = seconds;
  ui.player.play().catch(() => {}); // a browser that refuses to play keeps the position: the controls play it
}

// --------------------------------------------------------------------------------------------- the server

function connect() {
  const url = `${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/ws`;
  opened = false;
  ws = new WebSocket(url);
  ws.binaryType = "arraybuffer";
  ws.onopen = () => { opened = true; };
  ws.onmessage = (event) => onMessage(JSON.parse(event.data));
  ws.onclose = (event) => {
    pressed = recording = false;
    if (event.code === IDLE_CLOSE_CODE) { // not an error: nothing was lost, the next use reconnects
      setState("idle");
      ui.model.textContent = `disconnected (${event.reason || "idle"}); the button or a file reconnects`;
      return;
    }
    setState("error");
    ui.model.textContent = "disconnected";
    if (event.code === BUSY_CLOSE_CODE) return; // the server's "busy" message says why
    showError("server_gone", opened
      ? "The server went away (the connection closed). Start ds2-demo again and reload this page."
      : `Can't reach the server at ${url}. Is ds2-demo running? (It refuses pages of other origins: ` +
        "see ds2-demo --allowed_origins.)");
  };
}

// After an idle close: connect again. Resolves to whether the server said hello (it may be busy now).
function reconnect() {
  setState("connecting");
  ui.model.textContent = "connecting…";
  connect();
  return new Promise((resolve) => {
    // Registered after onmessage, so this runs once onMessage has handled the first message.
    ws.addEventListener("message", () => resolve(demo.state === "ready"), { once: true });
    ws.addEventListener("close", () => resolve(false), { once: true });
  });
}

function onMessage(message) {
  switch (message.type) {
    case "hello":
      demo.sampleRate = message.sample_rate;
      demo.mode = message.mode === "offline" ? "offline" : "streaming";
      demo.maxSeconds = message.max_seconds;
      document.body.dataset.mode = demo.mode;
      demo.words = message.words === true;
      ui.model.textContent = `model ${message.model} v${message.version} · ${message.sample_rate / 1000} kHz · ` +
        `final transcripts: ${message.decoder}${demo.words ? " with word times and confidences" : ""}`;
      showMode();
      setState("ready");
      break;
    case "partial":
      demo.partials.push({ text: message.text, audio_seconds: message.audio_seconds });
      showTranscript(message.text, "partial");
      ui.audio.textContent = `${message.audio_seconds.toFixed(2)} s`;
      break;
    case "final": {
      const latency = performance.now() - releasedAt;
      demo.finals.push({ ...message, client_latency_ms: latency });
      if (!(message.text && message.words && message.words.length && showWords(message.text, message.words))) {
        showTranscript(message.text || "(nothing recognized)", "final");
      }
      ui.latency.textContent = `${latency.toFixed(0)} ms`;
      ui.serverLatency.textContent = `${message.latency_ms.toFixed(0)} ms`;
      ui.rtf.textContent = message.rtf.toFixed(3);
      ui.audio.textContent = `${message.audio_seconds.toFixed(2)} s`;
      ui.decoder.textContent = message.decoder;
      setState("ready");
      break;
    }
    case "error":
      showError(message.code, message.message);
      if (demo.state === "recording" || demo.state === "finishing") {
        pressed = recording = false;
        if (demo.mode === "offline") showTranscript("", "idle"); // not "Recording…" any more
        setState("ready");
      }
      break;
    default:
      break; // "started": nothing to show
  }
}

function showMode() {
  const limit = `up to ${demo.maxSeconds} s`;
  if (demo.mode === "offline") {
    ui.mode.textContent = "Push to talk: this model is offline (bidirectional), so it hears the whole " +
      "utterance before it transcribes it. No transcript while you speak; the final one when you release.";
    ui.how.textContent = `Hold the button (or the space bar) while you speak, ${limit}; release it to ` +
      "transcribe what you said.";
  } else {
    ui.mode.textContent = "Streaming: partial transcripts appear while you speak.";
    ui.how.textContent = `Hold the button (or the space bar) while you speak, ${limit}; release it to get the ` +
      "final transcript.";
  }
  ui.mode.hidden = false;
  ui.level.hidden = demo.mode !== "offline";
}

// A microphone chunk on its way to the server: its level, and offline (no partials) how much is recorded.
function recorded(buffer) {
  const pcm = new Int16Array(buffer);
  let peak = 0;
  for (let i = 0; i < pcm.length; i++) peak = Math.max(peak, Math.abs(pcm[i]));
  demo.levels.push(peak / 32768);
  demo.recordedSamples += pcm.length;
  ui.level.value = peak / 32768;
  if (demo.mode === "offline" && recording) {
    const seconds = demo.recordedSamples / demo.sampleRate;
    showTranscript(`Recording… ${seconds.toFixed(1)} s`, "partial");
    ui.audio.textContent = `${seconds.toFixed(1)} s`;
  }
}

// Float samples as int16 the way the server reads them back (int16 / 32768, deepspeech2/audio.py): a 16-bit
// file decoded by the browser reaches the server sample for sample.
function toPcm16(sample) {
  return Math.max(-32768, Math.min(32767, Math.round(sample * 32768)));
}

function send(message) {
  if (ws && ws.readyState === WebSocket.OPEN) ws.send(message);
}

// --------------------------------------------------------------------------------------------- microphone

async function openMicrophone() {
  if (!navigator.mediaDevices || !navigator.mediaDevices.getUserMedia) {
    throw { code: "unsupported_browser", message: "This browser gives no microphone access to this page." };
  }
  if (!window.AudioWorkletNode) {
    throw { code: "unsupported_browser", message: "This browser can't process audio here (no AudioWorklet)." };
  }
  try {
    micStream = await navigator.mediaDevices.getUserMedia({
      audio: { channelCount: 1, echoCancellation: false, noiseSuppression: false, autoGainControl: false },
    });
  } catch (e) {
    if (e && (e.name === "NotAllowedError" || e.name === "SecurityError")) {
      throw { code: "mic_denied", message: "Microphone access was denied. Allow the microphone for this page " +
        "(the icon in the address bar) and try again, or transcribe a file instead." };
    }
    if (e && (e.name === "NotFoundError" || e.name === "OverconstrainedError")) {
      throw { code: "no_mic", message: "No microphone was found. Connect one, or transcribe a file instead." };
    }
    throw { code: "mic_error", message: `The microphone could not be opened: ${e && e.message ? e.message : e}` };
  }
  audioContext = new AudioContext();
  await audioContext.audioWorklet.addModule("/pcm-worklet.js");
  const source = audioContext.createMediaStreamSource(micStream);
  worklet = new AudioWorkletNode(audioContext, "pcm-downsampler", {
    processorOptions: { targetRate: demo.sampleRate, chunkMs: CHUNK_MS },
  });
  worklet.port.onmessage = (event) => {
    if (event.data instanceof ArrayBuffer) {
      if (recording || flushing) {
        recorded(event.data);
        send(event.data);
      }
    } else if (event.data && event.data.type === "flushed" && worklet.onflushed) {
      worklet.onflushed();
    }
  };
  // The worklet must be part of a graph the destination pulls; a silent gain keeps the speakers quiet.
  const mute = audioContext.createGain();
  mute.gain.value = 0;
  source.connect(worklet).connect(mute).connect(audioContext.destination);
}

async function startRecording() {
  if (demo.state === "idle") {
    reconnect(); // press again to talk: a button released while connecting would be missed
    return;
  }
  if (demo.state !== "ready" || pressed) return;
  pressed = true;
  clearError();
  setState("recording");
  try {
    if (!micStream) await openMicrophone();
    if (audioContext.state === "suspended") await audioContext.resume();
  } catch (e) {
    pressed = false;
    setState("ready");
    showError(e.code || "mic_error", e.message || String(e));
    return;
  }
  demo.partials = [];
  demo.levels = [];
  demo.recordedSamples = 0;
  demo.source = "mic";
  ui.player.pause();
  ui.player.hidden = true; // the file's audio is not this utterance's
  send(JSON.stringify({ type: "start", sample_rate: demo.sampleRate, encoding: "pcm_s16le", source: "mic" }));
  showTranscript(demo.mode === "offline" ? "Recording…" : "", "partial");
  recording = true;
  if (!pressed) release(true); // released while the microphone was opening
}

function release(force) {
  if (!pressed && force !== true) return;
  pressed = false;
  if (!recording) return; // still opening the microphone: startRecording finishes
  recording = false;
  setState("finishing");
  if (demo.mode === "offline") showTranscript("Transcribing…", "partial");
  // The worklet's last partial chunk first, then stop: nothing of the utterance's end is lost.
  flushing = true;
  worklet.onflushed = () => {
    worklet.onflushed = null;
    flushing = false;
    releasedAt = performance.now();
    send(JSON.stringify({ type: "stop" }));
  };
  worklet.port.postMessage({ type: "flush" });
}

ui.talk.addEventListener("pointerdown", (e) => { e.preventDefault(); startRecording(); });
ui.talk.addEventListener("pointerup", () => release());
ui.talk.addEventListener("pointercancel", () => release());
ui.talk.addEventListener("pointerleave", () => release());
document.addEventListener("keydown", (e) => {
  if (e.code === "Space" && !e.repeat && e.target.tagName !== "INPUT") { e.preventDefault(); startRecording(); }
});
document.addEventListener("keyup", (e) => { if (e.code === "Space") { e.preventDefault(); release(); } });

// --------------------------------------------------------------------------------------------- files

async function transcribeFile(file) {
  clearError();
  let samples;
  try {
    const data = await file.arrayBuffer();
    const decoded = await new AudioContext().decodeAudioData(data);
    // The browser resamples (and downmixes) to the model's rate.
    const frames = Math.ceil(decoded.duration * demo.sampleRate);
    const offline = new OfflineAudioContext(1, Math.max(frames, 1), demo.sampleRate);
    const source = offline.createBufferSource();
    source.buffer = decoded;
    source.connect(offline.destination);
    source.start();
    samples = (await offline.startRendering()).getChannelData(0);
  } catch (e) {
    showError("unsupported_audio", `Unsupported audio: ${file.name} could not be decoded (${e && e.message ? e.message : e}). ` +
      "Use a WAV, FLAC, Ogg or MP3 file.");
    return;
  }
  if (demo.state === "idle" && !(await reconnect())) return;
  if (fileUrl !== null) URL.revokeObjectURL(fileUrl);
  fileUrl = URL.createObjectURL(file);
  ui.player.src = fileUrl;
  ui.player.hidden = false;
  demo.source = "file";
  setState("finishing");
  showTranscript(demo.mode === "offline" ? `Transcribing ${file.name}…` : "", "partial");
  demo.partials = [];
  send(JSON.stringify({ type: "start", sample_rate: demo.sampleRate, encoding: "pcm_s16le", source: "file" }));
  const step = Math.round((demo.sampleRate * CHUNK_MS) / 1000);
  for (let i = 0; i < samples.length; i += step) {
    const part = samples.subarray(i, i + step);
    const pcm = new Int16Array(part.length);
    for (let k = 0; k < part.length; k++) {
      pcm[k] = toPcm16(part[k]);
    }
    send(pcm.buffer);
  }
  releasedAt = performance.now();
  send(JSON.stringify({ type: "stop" }));
}

ui.file.addEventListener("change", () => {
  const file = ui.file.files[0];
  ui.file.value = "";
  if (file) transcribeFile(file);
});

setState("connecting");
connect();
