"""`tbuild serve`: a run behind HTTP (FastAPI on uvicorn), with requests' sentences batched together
across requests (``batcher.py``), the request and response models and their checks (``api.py``) and
the app (``app.py``). FastAPI and uvicorn are the optional ``serve`` extra: only ``app.py`` and
``server.py`` import them."""
