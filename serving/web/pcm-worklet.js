// AudioWorklet processor: microphone audio at the AudioContext's rate (usually 48 kHz) -> 16-bit PCM at the
// model's rate (16 kHz), posted to the page in chunks of `chunkMs` as ArrayBuffers of little-endian int16.
//
// Downsampling: a windowed-sinc low-pass FIR (Blackman window, cut-off at 95% of the target Nyquist, so
// speech up to ~7.6 kHz passes and what would alias is removed), then the filtered signal is read at the
// target rate's instants (linear interpolation between input samples, for ratios that aren't whole numbers,
// e.g. 44.1 kHz). The channels are averaged to mono first. A {type: "flush"} message posts what is
// buffered at once and answers {type: "flushed"}, so the page can end an utterance without losing its tail.

const TAPS = 127; // odd: the filter's delay is a whole number of input samples (63)

function lowpass(cutoff, taps) {
  // cutoff in cycles per input sample (0 .. 0.5); unit gain at DC.
  const h = new Float32Array(taps);
  const mid = (taps - 1) / 2;
  let sum = 0;
  for (let i = 0; i < taps; i++) {
    const x = i - mid;
    const sinc = x === 0 ? 2 * cutoff : Math.sin(2 * Math.PI * cutoff * x) / (Math.PI * x);
    const w = 0.42 - 0.5 * Math.cos((2 * Math.PI * i) / (taps - 1)) + 0.08 * Math.cos((4 * Math.PI * i) / (taps - 1));
    h[i] = sinc * w;
    sum += h[i];
  }
  for (let i = 0; i < taps; i++) h[i] /= sum;
  return h;
}

class PcmDownsampler extends AudioWorkletProcessor {
  constructor(options) {
    super();
    const o = (options && options.processorOptions) || {};
    this.target = o.targetRate || 16000;
    this.step = sampleRate / this.target; // input samples per output sample (3 at 48 kHz)
    this.filter = this.step > 1 ? lowpass((0.5 * 0.95) / this.step, TAPS) : null;
    this.history = new Float32Array(this.filter ? this.filter.length : 1); // ring buffer of inputs
    this.pos = 0; // ring write position
    this.inputs = 0; // input samples seen
    this.next = 0; // the input-sample instant of the next output sample
    this.previous = 0; // the filtered sample before the current one
    this.chunk = new Int16Array(Math.max(1, Math.round((this.target * (o.chunkMs || 100)) / 1000)));
    this.filled = 0;
    this.port.onmessage = (event) => {
      if (event.data && event.data.type === "flush") {
        this.post();
        this.port.postMessage({ type: "flushed" });
      }
    };
  }

  filtered(x) {
    const h = this.filter;
    this.history[this.pos] = x;
    if (!h) return x;
    const n = h.length;
    let y = 0;
    let j = this.pos;
    for (let k = 0; k < n; k++) {
      y += h[k] * this.history[j];
      j = j === 0 ? n - 1 : j - 1;
    }
    this.pos = (this.pos + 1) % n;
    return y;
  }

  emit(sample) {
    this.chunk[this.filled++] = Math.max(-32768, Math.min(32767, Math.round(sample * 32768))); // as app.js's toPcm16
    if (this.filled === this.chunk.length) this.post();
  }

  post() {
    if (!this.filled) return;
    const out = this.chunk.slice(0, this.filled); // int16 in the platform's order: little-endian everywhere we run
    this.port.postMessage(out.buffer, [out.buffer]);
    this.filled = 0;
  }

  process(inputs) {
    const input = inputs[0];
    if (!input || input.length === 0) return true;
    const frames = input[0].length;
    for (let i = 0; i < frames; i++) {
      let x = 0;
      for (let c = 0; c < input.length; c++) x += input[c][i];
      const y = this.filtered(x / input.length);
      // Output instants in (inputs - 1, inputs]: interpolate between the previous and this filtered sample.
      while (this.next <= this.inputs) {
        const frac = this.next - (this.inputs - 1);
        this.emit(this.previous + frac * (y - this.previous));
        this.next += this.step;
      }
      this.previous = y;
      this.inputs += 1;
    }
    return true;
  }
}

registerProcessor("pcm-downsampler", PcmDownsampler);
