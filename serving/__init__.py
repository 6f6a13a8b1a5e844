"""Serving a ds2-export model over TF Serving's gRPC API, installed as the package `deepspeech2_serving`.

    batching.py      `BatchingConfig`, `Batcher`: Batch Dispatch (DS2 §7.1), TF Serving's batching knobs
    checks.py        `check_request`, `RequestError`: what a request may ask (its options, sizes) and the refusals
    servable.py      `Servable`: one loaded version (SavedModel only, no model code): forward passes, n-best, words
    streaming.py     `StreamSession`, `SessionStore`: streaming sessions kept by the server (ids, limits)
    predictor.py     `Predictor`: one Predict, checked, batched, searched, answered; a session's step
    versions.py      `ModelManager`, `latest_version`: the newest version served, newer ones polled for and loaded
    services.py      `PredictionServicer`, `ModelServicer`: TF Serving's gRPC services, the Predict admission limit
    server.py        `ServeConfig`, `start`, `serve`: ds2-serve's port, TLS, start and SIGTERM
    demo.py          `DemoConfig`, `start`, `serve`: ds2-demo, the page and its WebSocket on one port
    demo_page.py     the page's files, the origins that may open the WebSocket, the security headers
    demo_session.py  the WebSocket protocol and one connection's utterances (streaming steps, push to talk)
    demo_client.py   `DemoClientConfig`, `stream_file`: a WAV file through ds2-demo's WebSocket
    client.py        `ClientConfig`, `transcribe`: WAV files -> transcripts through PredictionServiceStub;
                     `stream`: a waveform through a ds2-serve streaming session
    loadtest.py      `LoadTestConfig`, `load_test`: N concurrent streams, latency percentiles, batch sizes
    models.config, batching_parameters.txt   the same model and batching for stock tensorflow_model_server

The server imports TensorFlow, `tensorflow-serving-api`, gRPC and the light parts of `deepspeech2`
(vocabulary, decoders): never the model code or the trainer.
"""
