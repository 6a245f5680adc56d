"""The pipeline's training step: a logistic regression fitted by gradient descent, with
Python's standard library alone.

It writes model.json in the form examples/train-and-serve's scorer (serve/score.py) reads
from AZUREML_MODEL_DIR, so the endpoint there can serve this pipeline's model. Nothing in
it depends on the time or on chance: the same data and epochs give the same file.

    python3 train.py --data train.csv --epochs 300 --model-dir OUT
"""

import argparse
import csv
import hashlib
import json
import math
import os


def load(path):
    rows, labels = [], []
    with open(path, newline="", encoding="utf-8") as f:
        for record in csv.DictReader(f):
            labels.append(float(record.pop("churned")))
            rows.append([float(v) for v in record.values()])
    if not rows:
        raise SystemExit(f"{path}: no training rows")
    return rows, labels


def fit(rows, labels, epochs, rate):
    weights, bias = [0.0] * len(rows[0]), 0.0
    for _ in range(epochs):
        grad_w, grad_b = [0.0] * len(weights), 0.0
        for row, label in zip(rows, labels):
            p = 1.0 / (1.0 + math.exp(-(bias + sum(w * x for w, x in zip(weights, row)))))
            for i, x in enumerate(row):
                grad_w[i] += (p - label) * x
            grad_b += p - label
        weights = [w - rate * g / len(rows) for w, g in zip(weights, grad_w)]
        bias -= rate * grad_b / len(rows)
    return weights, bias


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", required=True)
    parser.add_argument("--epochs", type=int, default=300)
    parser.add_argument("--learning-rate", type=float, default=0.5)
    parser.add_argument("--model-dir", required=True)
    args = parser.parse_args()

    rows, labels = load(args.data)
    weights, bias = fit(rows, labels, args.epochs, args.learning_rate)
    with open(args.data, "rb") as f:
        data_digest = hashlib.sha256(f.read()).hexdigest()
    model = {
        "weights": [round(w, 6) for w in weights],
        "bias": round(bias, 6),
        "epochs": args.epochs,
        "trained_on": {"rows": len(rows), "sha256": data_digest},
    }
    os.makedirs(args.model_dir, exist_ok=True)
    with open(os.path.join(args.model_dir, "model.json"), "w", encoding="utf-8") as f:
        json.dump(model, f, indent=2)
    print(f"trained on {len(rows)} rows for {args.epochs} epochs: {model['weights']} {model['bias']}")


if __name__ == "__main__":
    main()
