"""A small, deterministic training run that checkpoints to any fsspec URL (hub://volume/..., a
mount path, a local dir) with storage.fs.checkpoint and resumes from the latest complete checkpoint.

    python tests/scripts/ckpt_train.py URL --steps 30 --every 5 --out final.pt [--slow-save 30 --slow-step 15]

Prints one line per event (flushed), for a test that kills it at chosen points:
`resumed N|none`, `step N` (after N optimizer steps), `saving N`, `wrote N model.pt`, `saved N`.
Model, optimizer (Adam) and the global RNG (dropout) are all restored, so an interrupted run that
resumes ends with the same weights, bit for bit, as one that never stopped."""
from __future__ import annotations

import argparse
import io
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from storage.fs.checkpoint import Checkpoints  # noqa: E402


def say(msg: str) -> None:
    print(msg, flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--every", type=int, default=5)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--out", required=True)
    ap.add_argument("--slow-save", type=float, default=0.0, help="seconds to pause inside a save")
    ap.add_argument("--slow-step", type=int, default=0, help="the save that pauses (0: every save)")
    args = ap.parse_args()

    torch.manual_seed(args.seed)
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.Tanh(), torch.nn.Dropout(0.1),
                                torch.nn.Linear(32, 1))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    ckpts = Checkpoints(args.url)

    start = 0
    latest = ckpts.latest()
    if latest is not None:
        model.load_state_dict(latest.load_torch("model.pt"))
        state = latest.load_torch("train.pt")
        opt.load_state_dict(state["optim"])
        torch.set_rng_state(state["rng"])
        start = latest.step
    say(f"resumed {start if latest is not None else 'none'}")

    for step in range(start, args.steps):
        g = torch.Generator().manual_seed(args.seed * 100_000 + step)
        x = torch.randn(64, 8, generator=g)
        y = (x[:, :4].sum(1, keepdim=True) - x[:, 4:].prod(1, keepdim=True)).tanh()
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        done = step + 1
        say(f"step {done} loss {loss.item():.6f}")
        if done % args.every == 0:
            say(f"saving {done}")

            def model_file(f, done=done):
                torch.save(model.state_dict(), f)

            def train_file(f, done=done):
                say(f"wrote {done} model.pt")
                if args.slow_step in (0, done):  # a kill here lands between the two files of a save
                    time.sleep(args.slow_save)
                buf = io.BytesIO()
                torch.save({"optim": opt.state_dict(), "rng": torch.get_rng_state()}, buf)
                f.write(buf.getvalue())

            ckpts.save(done, {"model.pt": model_file, "train.pt": train_file}, metadata={"loss": loss.item()})
            say(f"saved {done}")
    torch.save(model.state_dict(), args.out)
    say("finished")


if __name__ == "__main__":
    main()
