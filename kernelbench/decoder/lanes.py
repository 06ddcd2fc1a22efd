"""Two lanes of work in one decode step: the main stream and a side stream that runs beside it.

At decode sizes most kernels of a layer fill a fraction of the GPU and their time is latency, so two independent
chains of kernels finish sooner side by side than one after the other. Two places of a layer (SITES) have one:
- "attention": the compressor steps and the indexer's head weights read only the layer input x, and the indexer's
  top-k needs only the indexer query and those caches; none of them waits on the attention front or the q path
  (model.Attention);
- "shared_expert": the MoE's shared expert reads only x, beside the gate and the routed experts (model.MoE, TP > 1,
  from SHARED_EXPERT_MIN_T tokens; otherwise rank 0's routed-expert launches carry the shared expert, the fused form).
  Only when the shared expert is whole on every rank (model.shared_split off): split, moe_routed runs each rank's
  slice itself (inside its routed launches at a few tokens, from 8 on a side stream of the op's own:
  kernels/common.py Beside, on lane 0 + 2 or 1 + 3, never this module's side lane's tickets).

`Lanes.side(site)` runs its block after all work the main stream has queued so far, on kernel lane 1
(kernels/common.py `lane`: its own split-K tickets and counters, so two concurrent kernels never share one) and, on a
CUDA device, on the side stream. `Lanes.join()` makes the main stream wait for everything the side queued. Both are
recorded into a CUDA graph as edges (the side stream forks from and joins the capture stream), so a captured step
replays with the same overlap. A site that is off runs its blocks in program order on the main lane (the MoE
then takes its fused form).

Tensor lifetimes: a tensor the side allocates and main reads after the join is freed into the side stream's pool;
the side only reuses it in a later `side()` block, which first waits for main's work up to that point, including
the reader. A tensor main allocates and the side reads stays referenced until after the join. Every layer that
enters the side joins before it returns, so no side work is left pending at the end of a step (graph capture
requires it).

On a CPU the sites keep their structure (lane 1, the side's launches in program order on the one stream): the
kernels and their inputs are those of the GPU step, which tests/test_lanes.py checks bit for bit on the GPU.

The KV lane (`KERNELBENCH_KV_LANE`: "auto", the default, up to KV_LANE_MAX_T tokens; "1" at every C; "0" never):
the attention site's KV compressor step runs on a lane of its own (KV_LANE, its own stream) instead of first in the
side lane's queue, so the indexer's chain there (head weights, index compressor, then top-k and index lists) no
longer waits behind it. At one token that chain is the step's critical path on the csa layers (session 17: the main
chain waited 0.32 ms per step for the side lane; main alone at a higher priority made the step 5.6% slower)."""
from __future__ import annotations

import contextlib

import torch

from kernelbench.kernels.common import Beside, new_stream
from kernelbench.usage import env_choice

SIDE_LANE = 1
KV_LANE = 4          # the KV compressor's lane when kv_lane is on (never the ops' own side lanes: 0 + 2, 1 + 2)
KV_LANE_ENV = "KERNELBENCH_KV_LANE"
KV_LANE_ENV_VALUES = ("auto", "0", "1")
# The KV lane up to this many tokens (KERNELBENCH_KV_LANE "auto"): H200, 43-layer Flash TP8 step, same-call A B A B
# (data/h200-2026-12-03-session18/call1, call2), with against without, ms: C = 1 3.759 / 3.769 vs 3.834 / 3.826 and
# 3.781 / 3.764 vs 3.783 / 3.773; C = 16 6.761 / 6.764 vs 6.846 / 6.811 and 6.826 / 6.813 vs 6.836 / 6.849; C = 64
# 10.717 / 10.704 vs 10.704 / 10.612 and 10.712 / 10.690 vs 10.608 / 10.612 (slower at 64 in both calls).
KV_LANE_MAX_T = 16
KV_LANE_ALWAYS = 1 << 30
# Where the KV lane forks from the main chain (KERNELBENCH_KV_LANE_FORK): "front" (the default), beside the attention
# front, as both read only the layer input x; "after", once the front is queued, beside the q path, the indexer query
# and its chain (the sparse attention, the first reader of the compressed KV, still joins after them). Session 44
# (H100, C = 1, data/h100-2026-12-06-session44 calls 3 and 6): attention_front takes 16.2 us beside the KV
# compressor's step and 8.9 us alone. Measured slower (session 45, H100, whole decode-bench runs in rotation,
# data/h100-2026-12-06-session45/call1): "after" 3.593 / 3.606 ms at C = 1 against 3.469 / 3.457 for "front", 6.820 /
# 6.850 against 6.775 / 6.770 at C = 16; with the KV lane also lowered 3.566 / 3.570 and 6.793 / 6.827. The overlap
# beside the front is worth more than the front's slowdown; "after" stays an option for other GPUs.
KV_FORK_ENV = "KERNELBENCH_KV_LANE_FORK"
KV_FORK_VALUES = ("front", "after")
SITES = ("attention", "shared_expert")
# The shared_expert site from this many tokens: H200, 43-layer Flash TP8 step (data/h200-2026-12-02-session10/call2),
# attention site alone vs both sites: C = 1 4.394 vs 4.756 ms (the shared expert's own four launches cost more than
# its rows inside the routed launches, which leave SMs idle at one token), C = 16 7.688 vs 7.381, C = 64 12.129 vs
# 11.879. Below it the routed launches carry the shared expert (the fused form).
SHARED_EXPERT_MIN_T = 16


def parse_sites(sites) -> frozenset:
    """True or "all" (every site), False / None / "none" (none), or names: a comma string or an iterable of SITES."""
    if sites is True or sites == "all":
        return frozenset(SITES)
    if sites is False or sites is None:
        return frozenset()
    names = [n.strip() for n in sites.split(",")] if isinstance(sites, str) else list(sites)
    names = [n for n in names if n and n != "none"]
    bad = [n for n in names if n not in SITES]
    if bad:
        raise ValueError(f"unknown overlap site(s) {', '.join(map(repr, bad))}: choose from {', '.join(SITES)} "
                         f"or none")
    return frozenset(names)


def kv_lane_from_env() -> int:
    """KERNELBENCH_KV_LANE: "auto" (the default), "1" or "0" -> the most tokens the KV lane applies to."""
    return {"auto": KV_LANE_MAX_T, "0": 0, "1": KV_LANE_ALWAYS}[env_choice(KV_LANE_ENV, "auto", KV_LANE_ENV_VALUES)]


def kv_fork_from_env() -> str:
    """KERNELBENCH_KV_LANE_FORK: "front" (the default) or "after" (the KV lane forks after the attention front)."""
    return env_choice(KV_FORK_ENV, "front", KV_FORK_VALUES)


def kv_lane_label(max_t: int, fork: str) -> str:
    """How a result names the KV lane setting: "off", "on" or "up to N tokens" (+ ", after the front")."""
    label = "off" if max_t <= 0 else "on" if max_t >= KV_LANE_ALWAYS else f"up to {max_t} tokens"
    return label + (", after the front" if max_t > 0 and fork == "after" else "")


class Lanes:
    def __init__(self, device, sites=True, streams: bool = True, shared_expert_min_t: int = SHARED_EXPERT_MIN_T,
                 kv_lane: bool | int | None = None, kv_fork: str | None = None):
        """`streams` False keeps the sites' structure on one stream on a GPU too (what tests compare against);
        `shared_expert_min_t`: the fewest tokens the shared_expert site applies to; `kv_lane` puts the attention
        site's KV compressor step on a lane of its own: True at every token count, False never, an int up to that
        many tokens, None from KERNELBENCH_KV_LANE; `kv_fork` where that lane forks: "front" or "after" (the
        attention front), None from KERNELBENCH_KV_LANE_FORK."""
        self.device = torch.device(device)
        self.sites = parse_sites(sites)
        self.min_tokens = {"shared_expert": shared_expert_min_t}     # per site; a site not named applies at any T
        self.streams = bool(streams) and self.device.type == "cuda" and bool(self.sites)   # side work runs beside
        max_t = kv_lane_from_env() if kv_lane is None else (KV_LANE_ALWAYS if kv_lane is True else int(kv_lane))
        self.kv_lane_max_t = max(0, max_t) if "attention" in self.sites else 0
        self.kv_fork = kv_fork_from_env() if kv_fork is None else kv_fork
        if self.kv_fork not in KV_FORK_VALUES:
            raise ValueError(f"kv_fork {self.kv_fork!r}: one of {', '.join(KV_FORK_VALUES)}")
        self._streams: dict = {}       # lane -> its stream (made at the first side block, kind "lane" or "kv")
        self._queued: dict = {}        # lane -> the side work queued since the last join (kernels/common.py Beside)

    def on(self, site: str, tokens: int | None = None) -> bool:
        """Whether `site` runs its independent work on the side lane (for a step of `tokens` tokens)."""
        if site not in SITES:
            raise ValueError(f"unknown overlap site {site!r}")
        return site in self.sites and (tokens is None or tokens >= self.min_tokens.get(site, 0))

    @property
    def kv_lane(self) -> str:
        """The KV lane setting as results record it (kv_lane_label)."""
        return kv_lane_label(self.kv_lane_max_t, self.kv_fork)

    def kv_applies(self, tokens: int | None) -> bool:
        """Whether the KV compressor step of a step of `tokens` tokens takes the KV lane (kv_lane_max_t is 0 without
        the attention site)."""
        return 0 < self.kv_lane_max_t and (tokens is None or tokens <= self.kv_lane_max_t)

    def kv_after_front(self, tokens: int | None) -> bool:
        """Whether that step's KV lane forks after the attention front (kv_fork "after") instead of beside it."""
        return self.kv_fork == "after" and self.kv_applies(tokens)

    def made_again(self, kv_lane_from_env: bool = False, kv_fork_from_env: bool = False) -> "Lanes":
        """New Lanes with these sites, stream use and shared-expert reach, whose streams are made at their first use
        (at the priorities then in force); the KV lane's reach and fork read from the environment again where asked,
        else kept (decode-bench --try's setting trials, trials.settings_applied)."""
        return Lanes(self.device, self.sites, streams=self.streams,
                     shared_expert_min_t=self.min_tokens["shared_expert"],
                     kv_lane=None if kv_lane_from_env else self.kv_lane_max_t,
                     kv_fork=None if kv_fork_from_env else self.kv_fork)

    def describe(self) -> str:
        return ",".join(s for s in SITES if s in self.sites) or "none"

    def _side_stream(self, lane_no: int = SIDE_LANE):
        if lane_no not in self._streams:   # stream kind "kv" for the KV lane (its priority set apart), else "lane"
            self._streams[lane_no] = new_stream(self.device, "kv" if lane_no == KV_LANE else "lane")
        return self._streams[lane_no]

    @contextlib.contextmanager
    def side(self, site: str, kv: bool = False, tokens: int | None = None):
        """The block's launches on lane 1 and (CUDA) the side stream, after main's queued work; for a site that is
        off, the block as it stands (main lane, program order). `kv`: the attention site's KV compressor step of a
        step of `tokens` tokens, on KV_LANE and its own stream when the KV lane applies to them (else as any side
        block)."""
        if not self.on(site):
            yield
            return
        kv = kv and self.kv_applies(tokens)
        lane_no = KV_LANE if kv else SIDE_LANE
        if lane_no not in self._queued:
            self._queued[lane_no] = Beside(self.device, lane_no, self._side_stream(lane_no) if self.streams else None,
                                           self.streams)
        with self._queued[lane_no].run():
            yield

    def join(self) -> None:
        """The main stream waits for the side lanes' queued work."""
        for queued in self._queued.values():
            queued.join()
        self._queued.clear()
