"""The pipeline's last step: scores the trained model on the held-out rows, with Python's
standard library alone, and writes metrics.json.

    python3 score.py --model-dir MODEL --data test.csv --out OUT
"""

import argparse
import csv
import json
import math
import os


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model-dir", required=True)
    parser.add_argument("--data", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()

    with open(os.path.join(args.model_dir, "model.json"), encoding="utf-8") as f:
        model = json.load(f)
    correct, total, log_loss = 0, 0, 0.0
    with open(args.data, newline="", encoding="utf-8") as f:
        for record in csv.DictReader(f):
            label = float(record.pop("churned"))
            z = model["bias"] + sum(w * float(x) for w, x in zip(model["weights"], record.values()))
            p = min(max(1.0 / (1.0 + math.exp(-z)), 1e-9), 1 - 1e-9)
            correct += (p > 0.5) == (label == 1.0)
            log_loss -= label * math.log(p) + (1 - label) * math.log(1 - p)
            total += 1
    if total == 0:
        raise SystemExit(f"{args.data}: no rows to score")
    metrics = {
        "rows": total,
        "accuracy": round(correct / total, 4),
        "log_loss": round(log_loss / total, 4),
        "model_trained_on": model["trained_on"],
    }
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "metrics.json"), "w", encoding="utf-8") as f:
        json.dump(metrics, f, indent=2)
    print(f"accuracy {metrics['accuracy']} and log loss {metrics['log_loss']} on {total} held-out rows")


if __name__ == "__main__":
    main()
