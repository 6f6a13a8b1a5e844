"""The gRPC services of ds2-serve: TF Serving's PredictionService and ModelService over one `ModelManager`.

`Predict` is admitted while fewer than `max_requests` are being handled (more: RESOURCE_EXHAUSTED at once), then
answered by the `Predictor`; `GetModelMetadata` and `GetModelStatus` answer from the manager alone, so they keep
answering while every Predict slot is busy. Each Predict response carries gRPC trailing metadata that standard
clients ignore: `ds2-batch-size` (rows in the forward pass it rode in), `ds2-queue-ms` and `ds2-run-ms`
(serving/loadtest.py reads them).
"""

from __future__ import annotations

import threading

import grpc
from google.protobuf import any_pb2
from tensorflow_serving.apis import (get_model_metadata_pb2, get_model_status_pb2, model_service_pb2_grpc,
                                     prediction_service_pb2_grpc)

from deepspeech2_serving.checks import RequestError, invalid
from deepspeech2_serving.predictor import Predictor, internal
from deepspeech2_serving.versions import ModelManager


class PredictionServicer(prediction_service_pb2_grpc.PredictionServiceServicer):
    """TF Serving's PredictionService: Predict and GetModelMetadata (Classify, Regress and MultiInference
    answer UNIMPLEMENTED: they take tf.Examples, not audio)."""

    def __init__(self, manager: ModelManager, predictor: Predictor, max_requests: int = 64):
        self.manager = manager
        self.predictor = predictor
        self.max_requests = max_requests
        self.in_flight = 0  # Predict requests being handled
        self._lock = threading.Lock()

    def Predict(self, request, context):
        with self._lock:
            busy = self.in_flight >= self.max_requests
            self.in_flight += not busy
        if busy:
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, f"{self.max_requests} requests are being handled, the "
                          "most this server takes at once (--max_concurrent_requests); retry later")
        try:
            servable = self.manager.resolve(request.model_spec)
            response, result = self.predictor.predict(request, servable, context=context)
        except RequestError as e:
            context.abort(e.code, e.message)
        except Exception:  # a bug, not the request: INTERNAL rather than gRPC's UNKNOWN
            e = internal("Predict failed")
            context.abort(e.code, e.message)
        finally:
            with self._lock:
                self.in_flight -= 1
        context.set_trailing_metadata((("ds2-batch-size", str(result.batch_size)),
                                       ("ds2-queue-ms", f"{1000 * result.queue_seconds:.2f}"),
                                       ("ds2-run-ms", f"{1000 * result.run_seconds:.2f}")))
        return response

    def GetModelMetadata(self, request, context):
        try:
            servable = self.manager.resolve(request.model_spec)
            fields = list(request.metadata_field)
            if fields != ["signature_def"]:
                raise invalid(f"metadata_field must be ['signature_def'] (the only metadata TF Serving gives), "
                              f"got {fields}")
        except RequestError as e:
            context.abort(e.code, e.message)
        signatures = get_model_metadata_pb2.SignatureDefMap()
        for key, value in servable.signature_defs.items():
            signatures.signature_def[key].CopyFrom(value)
        response = get_model_metadata_pb2.GetModelMetadataResponse()
        response.model_spec.name = servable.name
        response.model_spec.version.value = servable.version
        packed = any_pb2.Any()
        packed.Pack(signatures)
        response.metadata["signature_def"].CopyFrom(packed)
        return response


class ModelServicer(model_service_pb2_grpc.ModelServiceServicer):
    """TF Serving's ModelService: GetModelStatus (HandleReloadConfigRequest answers UNIMPLEMENTED)."""

    def __init__(self, manager: ModelManager):
        self.manager = manager

    def GetModelStatus(self, request, context):
        try:
            spec = request.model_spec
            if spec.name != self.manager.name:
                raise invalid(f"unknown model {spec.name!r}; this server serves {self.manager.name!r}")
            statuses = self.manager.statuses(spec.version.value if spec.HasField("version") else None)
        except RequestError as e:
            context.abort(e.code, e.message)
        return get_model_status_pb2.GetModelStatusResponse(model_version_status=statuses)


__all__ = ["ModelServicer", "PredictionServicer"]
