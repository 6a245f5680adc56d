"""Trains a tiny churn model with Python's standard library alone.

A logistic regression fitted by gradient descent on a CSV of three features and a label.
The job writes the model, model.json, into its output directory; the endpoint's scorer
(../serve/score.py) reads it from AZUREML_MODEL_DIR.

    python3 train.py --data data.csv --epochs 300 --model-dir OUT
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
            label = record.pop("churned")
            rows.append([float(v) for v in record.values()])
            labels.append(float(label))
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
