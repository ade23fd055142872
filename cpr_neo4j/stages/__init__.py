"""The pipeline's stages (train, calibrate, ask, evaluate): each wires graph, search,
model and conformal layers together for one CLI command."""
