"""Serving a ds2-export model over TF Serving's gRPC API, installed as the package `deepspeech2_serving`.

    batching.py    `BatchingConfig`, `Batcher`: Batch Dispatch (DS2 §7.1), TF Serving's batching knobs
    servable.py    `Servable`: one loaded version (SavedModel only, no model code), request checks, n-best
    streaming.py   `StreamSession`, `SessionStore`: streaming sessions kept by the server (ids, limits)
    server.py      `ServeConfig`, `start`, `serve`: PredictionService + ModelService, version polling, SIGTERM
    client.py      `ClientConfig`, `transcribe`: WAV files -> transcripts through PredictionServiceStub;
                   `stream`: a waveform through a ds2-serve streaming session
    loadtest.py    `LoadTestConfig`, `load_test`: N concurrent streams, latency percentiles, batch sizes
    models.config, batching_parameters.txt   the same model and batching for stock tensorflow_model_server

The server imports TensorFlow, `tensorflow-serving-api`, gRPC and the light parts of `deepspeech2`
(vocabulary, decoders): never the model code or the trainer.
"""
