"""A training script written for managed training only (the SageMaker container
layout), run by labd unchanged: argparse whose defaults are the SM_* variables,
hyperparameters from /opt/ml/input/config/hyperparameters.json, the data channel
"train" under /opt/ml/input/data/train, the model to /opt/ml/model, extra output to
/opt/ml/output/data.  Fits y = a*x + b to the CSV rows of the channel by gradient
descent (standard library only) and prints `epoch=N mse=X`."""

import argparse
import glob
import json
import os


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--learning-rate", type=float, default=0.1)
    p.add_argument("--model-dir", default=os.environ["SM_MODEL_DIR"])
    p.add_argument("--output-data-dir", default=os.environ["SM_OUTPUT_DATA_DIR"])
    p.add_argument("--train", default=os.environ["SM_CHANNEL_TRAIN"])
    p.add_argument("--hosts", type=json.loads, default=os.environ["SM_HOSTS"])
    p.add_argument("--current-host", default=os.environ["SM_CURRENT_HOST"])
    p.add_argument("--num-gpus", type=int, default=os.environ["SM_NUM_GPUS"])
    return p.parse_args()


def main():
    args = parse_args()
    with open("/opt/ml/input/config/hyperparameters.json") as fh:
        hp = json.load(fh)  # managed training passes every value as a string
    epochs = int(hp.get("epochs", args.epochs))
    lr = float(hp.get("learning-rate", args.learning_rate))
    with open("/opt/ml/input/config/resourceconfig.json") as fh:
        rc = json.load(fh)
    assert rc["current_host"] == args.current_host and args.hosts == rc["hosts"], rc
    rows = []
    for f in sorted(glob.glob(os.path.join(args.train, "*.csv"))):
        with open(f) as fh:
            rows += [tuple(map(float, ln.split(","))) for ln in fh if ln.strip()]
    print(f"train: {len(rows)} rows from {args.train}, epochs={epochs} lr={lr} "
          f"hosts={args.hosts} gpus={args.num_gpus}", flush=True)
    a = b = 0.0
    for epoch in range(1, epochs + 1):
        ga = sum((a * x + b - y) * x for x, y in rows) * 2 / len(rows)
        gb = sum(a * x + b - y for x, y in rows) * 2 / len(rows)
        a, b = a - lr * ga, b - lr * gb
        mse = sum((a * x + b - y) ** 2 for x, y in rows) / len(rows)
        print(f"epoch={epoch} mse={mse:.6g}", flush=True)
    os.makedirs(args.model_dir, exist_ok=True)
    with open(os.path.join(args.model_dir, "model.json"), "w") as fh:
        json.dump({"a": a, "b": b}, fh)
    os.makedirs(args.output_data_dir, exist_ok=True)
    with open(os.path.join(args.output_data_dir, "metrics.json"), "w") as fh:
        json.dump({"mse": mse, "rows": len(rows)}, fh)
    print("model saved", flush=True)


if __name__ == "__main__":
    main()
