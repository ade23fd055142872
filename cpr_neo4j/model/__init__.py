"""The learned path scorer.

encoder (TextEncoder, step/path texts) -> scorer (PathScorer: V = V_sem + Delta) with
rcvnet (RCVNet, the residual), train (train_rcvnet, pairwise_accuracy) and store
(save_scorer, load_scorer). Submodules are imported explicitly: they pull in torch.
"""
