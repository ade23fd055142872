"""Training data and the training/calibration split: which labelled questions train and
which calibrate (questions.py, labels.py), questions generated from the graph
(generate.py, paraphrase.py), the labelling flow (labelling.py), PUCT rollouts
(puct.py) and their training pairs (pairs.py). `cpr train` wires them to the model in
stages/train.py."""
