"""The pipeline's first step: cleans the raw churn CSV and splits it, with Python's
standard library alone.

Rows with a missing or non-numeric value are dropped (and counted); every fourth kept row
goes to the test set, the others to the training set, so the split is the same on every
run and an unchanged input gives an unchanged output (which lets a later run reuse it).

    python3 prep.py --raw churn.csv --out OUT     # writes OUT/train.csv and OUT/test.csv
"""

import argparse
import csv
import os

COLUMNS = ["tenure_years", "support_calls", "monthly_spend", "churned"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--raw", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()

    kept, dropped = [], 0
    with open(args.raw, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        if reader.fieldnames != COLUMNS:
            raise SystemExit(f"{args.raw}: columns {reader.fieldnames}; want {COLUMNS}")
        for record in reader:
            try:
                kept.append([float(record[c]) for c in COLUMNS])
            except ValueError:
                dropped += 1
    if len(kept) < 4:
        raise SystemExit(f"{args.raw}: {len(kept)} usable rows; want at least 4")

    os.makedirs(args.out, exist_ok=True)
    splits = {"train.csv": [r for i, r in enumerate(kept) if i % 4 != 3],
              "test.csv": [r for i, r in enumerate(kept) if i % 4 == 3]}
    for name, rows in splits.items():
        with open(os.path.join(args.out, name), "w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f, lineterminator="\n")
            writer.writerow(COLUMNS)
            writer.writerows([f"{v:g}" for v in row] for row in rows)
    print(f"kept {len(kept)} rows, dropped {dropped}: "
          f"{len(splits['train.csv'])} to train, {len(splits['test.csv'])} to test")


if __name__ == "__main__":
    main()
