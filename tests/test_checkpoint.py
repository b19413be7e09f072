"""Checkpoint and resume across instances, with real PyTorch against a live hub (the killed runs
on PostgreSQL + Ceph RGW, the rest on both backends): a training process killed with SIGKILL at
several points — between checkpoints and in the middle of writing one — resumes in a fresh process
with an empty cache from the latest *complete* checkpoint, and ends with the same weights, bit for
bit, as a run that never stopped. Also the writers people use: safetensors and
torch.distributed.checkpoint through its fsspec writer."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from storage.fs.checkpoint import MANIFEST, Checkpoints, CorruptCheckpointError

SCRIPT = Path(__file__).parent / "scripts" / "ckpt_train.py"


@pytest.fixture
def client_env(hub, alice, tmp_path, monkeypatch) -> dict[str, str]:  # noqa: F811
    """What a process on an instance has: the hub's address and the owner's token (no store keys)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUB_", "AWS_"))}
    env |= {"HUB_ENDPOINT": hub.url, "HUB_TOKEN": alice, "HUB_DISABLE_PROGRESS_BARS": "1"}
    for k in [k for k in os.environ if k.startswith(("HF_", "HUB_"))]:
        monkeypatch.delenv(k)
    monkeypatch.setenv("HUB_ENDPOINT", hub.url)
    monkeypatch.setenv("HUB_TOKEN", alice)
    return env


def run(env, url: str, out: Path, cache: Path, *, kill_after: str | None = None) -> list[str]:
    """Runs the training script as its own process (a fresh 'instance': own cache dir) and, with
    `kill_after`, SIGKILLs it as soon as it prints that line. Killing after `wrote N model.pt` makes
    save N pause there (and only that save), so the kill lands between the checkpoint's two files.
    Returns the lines it printed."""
    cache.mkdir(parents=True, exist_ok=True)
    slow = ["--slow-save", "30", "--slow-step", kill_after.split()[1]] if kill_after and kill_after.startswith(
        "wrote ") else []
    proc = subprocess.Popen([sys.executable, str(SCRIPT), url, "--steps", "30", "--every", "5", "--out", str(out),
                             *slow],
                            env=env | {"HUB_CACHE_DIR": str(cache), "HF_HUB_CACHE": str(cache / "hf")},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = []
    try:
        for line in proc.stdout:
            lines.append(line.strip())
            if kill_after and (line.strip() == kill_after or line.startswith(kill_after + " ")):
                proc.send_signal(signal.SIGKILL)
                break
        proc.wait(120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if kill_after:
        assert proc.returncode == -signal.SIGKILL, (lines, proc.stderr.read())
    else:
        assert proc.returncode == 0, (lines, proc.stderr.read())
    return lines


def test_a_run_killed_anywhere_resumes_to_the_same_weights(hub, client_env, unique, tmp_path):
    """Through hub://volume, on the production backend (PostgreSQL + Ceph RGW) only: a minute of
    training runs, and the embedded hub's volume semantics (write, rename, list; the manifest
    checks) are covered on both backends by the tests below and by tests/test_volumes.py."""
    if hub.name != "pg_rgw":
        pytest.skip("the killed training runs go against the PostgreSQL + RGW backend")
    base = f"hub://volume/ckpt-{unique}"
    straight = run(client_env, f"{base}/straight", tmp_path / "straight.pt", tmp_path / "c0")
    assert straight[0] == "resumed none" and straight[-1] == "finished"

    url = f"{base}/interrupted"
    out = tmp_path / "interrupted.pt"
    resumed = []
    # 1: killed between checkpoints (after step 7; step 5 is saved)
    resumed.append(run(client_env, url, out, tmp_path / "c1", kill_after="step 7")[0])
    # 2: killed in the middle of writing checkpoint 15 (model.pt written, train.pt and manifest not)
    resumed.append(run(client_env, url, out, tmp_path / "c2", kill_after="wrote 15 model.pt")[0])
    ckpts = Checkpoints(url)
    assert ckpts.steps()[0] == 15, "the killed save left its directory"
    assert ckpts.latest().step == 10, "the highest-numbered but incomplete checkpoint must not be picked"
    # 3: killed right after a save completed
    resumed.append(run(client_env, url, out, tmp_path / "c3", kill_after="saved 20")[0])
    # 4: to the end
    last = run(client_env, url, out, tmp_path / "c4")
    resumed.append(last[0])
    assert resumed == ["resumed none", "resumed 5", "resumed 10", "resumed 20"]
    assert last[-1] == "finished"

    a, b = torch.load(tmp_path / "straight.pt"), torch.load(out)
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k
    assert [c.step for c in Checkpoints(url).list()] == [30, 25, 20, 15, 10, 5]


def _fuse_missing() -> str | None:
    import shutil

    if not os.path.exists("/dev/fuse") or shutil.which("fusermount3") is None:
        return "FUSE is not available (/dev/fuse, fusermount3)"
    return None


@pytest.mark.skipif(_fuse_missing() is not None, reason=str(_fuse_missing()))
def test_a_run_killed_anywhere_resumes_through_a_fresh_mount_on_another_instance(hub, client_env, unique, tmp_path):
    """The same, with the checkpoints written through the volume's FUSE mount: every process is a
    new 'instance' — its own mount of the volume and its own empty cache — and the runs are
    compared with one through hub:// (the same volume seen the other way). On the production
    backend only, as the test above: the mount is client code over the same volume API (~50 s)."""
    if hub.name != "pg_rgw":
        pytest.skip("the mount's side of resuming runs on the PostgreSQL + RGW backend")
    def mount(n: int) -> Path:
        point, cache = tmp_path / f"mnt{n}", tmp_path / f"cache{n}"
        proc = subprocess.run([sys.executable, "-m", "storage.cli", "mount", "volume", str(point),
                               "--log-file", str(tmp_path / f"mount{n}.log")],
                              env=client_env | {"HUB_CACHE_DIR": str(cache)}, capture_output=True, text=True,
                              timeout=180)
        assert proc.returncode == 0 and os.path.ismount(point), proc.stderr
        return point

    def umount(point: Path) -> None:
        subprocess.run([sys.executable, "-m", "storage.cli", "umount", str(point)], env=client_env,
                       capture_output=True, timeout=120)
        subprocess.run(["fusermount3", "-u", "-z", str(point)], capture_output=True)

    out = tmp_path / "mounted.pt"
    resumed, points = [], []
    try:
        for n, kill in enumerate(["step 12", "wrote 20 model.pt", None]):
            point = mount(n)
            points.append(point)
            lines = run(client_env, str(point / f"ckpt-{unique}"), out, tmp_path / f"c{n}", kill_after=kill)
            resumed.append(lines[0])
            umount(point)
        assert resumed == ["resumed none", "resumed 10", "resumed 15"]
        # what the mounts wrote is what hub:// sees: the same checkpoints, complete
        assert [c.step for c in Checkpoints(f"hub://volume/ckpt-{unique}").list()] == [30, 25, 20, 15, 10, 5]
        straight = run(client_env, f"hub://volume/straight-{unique}", tmp_path / "straight.pt", tmp_path / "cs")
        assert straight[-1] == "finished"
        a, b = torch.load(tmp_path / "straight.pt"), torch.load(out)
        for k in a:
            assert torch.equal(a[k], b[k]), k
    finally:
        for point in points:
            umount(point)


def test_a_corrupt_checkpoint_is_never_loaded(client_env, unique):
    ckpts = Checkpoints(f"hub://volume/corrupt-{unique}")
    ckpts.save(1, {"w.bin": b"one" * 1000})
    ckpts.save(2, {"w.bin": b"two" * 1000})
    # same size, different bytes: sizes match, the sha256 does not
    with ckpts.fs.open(f"{ckpts.step_dir(2)}/w.bin", "wb") as f:
        f.write(b"TWO" * 1000)
    assert ckpts.latest().step == 2
    with pytest.raises(CorruptCheckpointError, match="sha256"):
        ckpts.latest().read_bytes("w.bin")
    assert ckpts.latest(verify=True).step == 1
    assert ckpts.latest(verify=True).read_bytes("w.bin") == b"one" * 1000
    # a truncated file fails the cheap size check already
    with ckpts.fs.open(f"{ckpts.step_dir(1)}/w.bin", "wb") as f:
        f.write(b"on")
    assert ckpts.latest(verify=False).step == 2 and ckpts.latest(verify=True) is None
    # a manifest that does not parse makes the step incomplete, not an error
    with ckpts.fs.open(f"{ckpts.step_dir(2)}/{MANIFEST}", "wb") as f:
        f.write(b"{not json")
    assert ckpts.latest() is None
    # a complete checkpoint is never overwritten; an incomplete one is replaced
    ckpts.save(3, {"a": b"1"})
    with pytest.raises(FileExistsError):
        ckpts.save(3, {"a": b"2"})
    ckpts.fs.rm(f"{ckpts.step_dir(3)}/{MANIFEST}")
    assert ckpts.save(3, {"a": b"2"}).read_bytes("a") == b"2"


def test_safetensors_and_keep_last_n(client_env, unique):
    from safetensors.torch import load, save

    ckpts = Checkpoints(f"hub://volume/st-{unique}", keep=2)
    tensors = {"w": torch.arange(12, dtype=torch.float32).reshape(3, 4)}
    for step in (1, 2, 3):
        ckpts.save(step, {"model.safetensors": save({k: v * step for k, v in tensors.items()})})
    assert [c.step for c in ckpts.list()] == [3, 2]
    back = load(ckpts.latest().read_bytes("model.safetensors"))
    assert torch.equal(back["w"], tensors["w"] * 3)


def test_torch_distributed_checkpoint_through_its_fsspec_writer(client_env, unique):
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint._fsspec_filesystem import FsspecReader, FsspecWriter

    ckpts = Checkpoints(f"hub://volume/dcp-{unique}")
    state = {"model": torch.nn.Linear(4, 3).state_dict()}
    for step in (1, 2):
        dcp.save(state, storage_writer=FsspecWriter(ckpts.dcp_dir(step)))
        ckpts.commit(step, metadata={"writer": "dcp"})
    latest = ckpts.latest()
    assert latest.step == 2 and ".metadata" in latest.files and latest.metadata == {"writer": "dcp"}
    target = {"model": {k: torch.zeros_like(v) for k, v in state["model"].items()}}
    dcp.load(target, storage_reader=FsspecReader(ckpts.url(latest.step)))
    for k, v in state["model"].items():
        assert torch.equal(target["model"][k], v)


def test_lightning_checkpoints_to_a_hub_volume_path_and_resumes(client_env, unique, tmp_path):
    import lightning as L
    from lightning.pytorch.callbacks import ModelCheckpoint

    class Tiny(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(4, 1)

        def training_step(self, batch, _):
            x, y = batch
            return torch.nn.functional.mse_loss(self.layer(x), y)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    g = torch.Generator().manual_seed(0)
    data = torch.utils.data.TensorDataset(torch.randn(64, 4, generator=g), torch.randn(64, 1, generator=g))

    def trainer(steps: int) -> L.Trainer:
        return L.Trainer(max_steps=steps, accelerator="cpu", logger=False, enable_progress_bar=False,
                         enable_model_summary=False, default_root_dir=tmp_path,
                         callbacks=[ModelCheckpoint(dirpath=f"hub://volume/lightning-{unique}",
                                                    every_n_train_steps=3, save_top_k=-1, save_last=True)])

    loader = torch.utils.data.DataLoader(data, batch_size=8)
    trainer(6).fit(Tiny(), loader)
    fs = Checkpoints(f"hub://volume/lightning-{unique}").fs
    names = sorted(p.rsplit("/", 1)[-1] for p in fs.ls(f"volume/lightning-{unique}", detail=False))
    assert names == ["epoch=0-step=3.ckpt", "epoch=0-step=6.ckpt", "last.ckpt"]
    again = trainer(9)
    again.fit(Tiny(), loader, ckpt_path=f"hub://volume/lightning-{unique}/last.ckpt")
    assert again.global_step == 9
