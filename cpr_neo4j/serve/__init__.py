"""`cpr serve`: the ask stage over HTTP (FastAPI), with scorers loaded once per model.

app (the app factory and routes), answer (one question through the ask stage; errors to
HTTP statuses), schemas (request/response bodies), cache (the scorer pool lent to
requests), graph (the shared store, opened on first use), auth (bearer token, bind rule).
"""
