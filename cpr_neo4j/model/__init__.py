"""The learned path scorer.

encoder (TextEncoder on ONNX Runtime: embedder, export, probe; step/path texts) -> scorer
(PathScorer: V = V_sem + Delta, numpy or torch backend) with rcvnet (RCVWeights, the numpy
residual; rcvnet_torch, the torch module), train (train_rcvnet, pairwise_accuracy), store
(save_scorer, load_scorer) and threads. Only training, the CUDA scorer and the one-time
ONNX export import torch, and they do so when called.
"""
