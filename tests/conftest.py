import os

# CPU only and quiet TF logs for every test process (and the subprocesses they start).
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
