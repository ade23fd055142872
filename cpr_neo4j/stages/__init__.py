"""The pipeline's stages (train, calibrate, ask): each wires graph, linking, search, hints,
model and conformal layers together for one CLI command (`cpr eval` is evaluation/)."""
