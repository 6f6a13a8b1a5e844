// ds2-demo's page: push-to-talk microphone streaming and file upload over one WebSocket (protocol: serving/demo.py).
"use strict";

const CHUNK_MS = 100; // audio per WebSocket message
const IDLE_CLOSE_CODE = 4408; // the server closed a connection that sent nothing for a while (serving/demo.py)
const BUSY_CLOSE_CODE = 1013; // the server has no room for this connection ("try again later")
const $ = (id) => document.getElementById(id);
const ui = {
  model: $("model"), error: $("error"), talk: $("talk"), talkLabel: $("talk-label"), file: $("file"),
  transcript: $("transcript"), latency: $("latency"), serverLatency: $("server-latency"), rtf: $("rtf"),
  audio: $("audio"), decoder: $("decoder"),
};
// What the page is doing, for people and for the browser test: connecting, ready, recording, finishing, error,
// idle (the server closed the unused connection; the button or a file reconnects).
// `partials` holds the current utterance's partial messages ({text, audio_seconds}), `finals` every final one.
const demo = (window.ds2Demo = { state: "connecting", partials: [], finals: [], errors: [], sampleRate: 16000 });

let ws = null;
let opened = false;
let audioContext = null;
let worklet = null;
let micStream = null;
let pressed = false; // the button (or space bar) is held
let recording = false; // microphone chunks go to the server
let flushing = false; // the worklet's last chunk is on its way
let releasedAt = 0;

function setState(state) {
  demo.state = state;
  document.body.dataset.state = state;
  const usable = state === "ready" || state === "idle";
  ui.talk.disabled = !usable && state !== "recording";
  ui.file.disabled = !usable;
  ui.talk.setAttribute("aria-pressed", state === "recording" ? "true" : "false");
  ui.talkLabel.textContent = state === "recording" ? "Listening… release to finish"
    : state === "finishing" ? "Finishing…" : state === "idle" ? "Reconnect" : "Hold to talk";
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
      ui.model.textContent = `model ${message.model} v${message.version} · ${message.sample_rate / 1000} kHz · ` +
        `final transcripts: ${message.decoder}`;
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
      showTranscript(message.text || "(nothing recognized)", "final");
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
        setState("ready");
      }
      break;
    default:
      break; // "started": nothing to show
  }
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
      if (recording || flushing) send(event.data);
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
  send(JSON.stringify({ type: "start", sample_rate: demo.sampleRate, encoding: "pcm_s16le", source: "mic" }));
  showTranscript("", "partial");
  recording = true;
  if (!pressed) release(true); // released while the microphone was opening
}

function release(force) {
  if (!pressed && force !== true) return;
  pressed = false;
  if (!recording) return; // still opening the microphone: startRecording finishes
  recording = false;
  setState("finishing");
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
  setState("finishing");
  showTranscript("", "partial");
  demo.partials = [];
  send(JSON.stringify({ type: "start", sample_rate: demo.sampleRate, encoding: "pcm_s16le", source: "file" }));
  const step = Math.round((demo.sampleRate * CHUNK_MS) / 1000);
  for (let i = 0; i < samples.length; i += step) {
    const part = samples.subarray(i, i + step);
    const pcm = new Int16Array(part.length);
    for (let k = 0; k < part.length; k++) {
      const s = Math.max(-1, Math.min(1, part[k]));
      pcm[k] = s < 0 ? Math.round(s * 32768) : Math.round(s * 32767);
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
