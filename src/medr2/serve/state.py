"""What the service keeps between requests: the engine (swapped after writes), the bounded pool
for generator calls, background jobs, and the Prometheus counters, gathered in one
:class:`ServeState` per application (``app.state.serve``; routes reach it through
:func:`medr2.serve.deps.get_state`).

Example::

    >>> from medr2.serve.state import Metrics
    >>> m = Metrics()
    >>> m.observe("GET", "/health", 200, 0.004)
    >>> 'medr2_requests_total{method="GET",path="/health",status="200"} 1' in m.render()
    True
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Hashable, Iterator, Optional

if TYPE_CHECKING:
    from medr2.config import Config, ServeConfig
    from medr2.index.index import Index
    from medr2.llm.factory import Models

BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)


class Metrics:
    """Request counts and latency by route, model calls and refusals, in the Prometheus text format."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.requests: dict[tuple[str, str, int], int] = defaultdict(int)
        self.latency: dict[str, list[float]] = defaultdict(lambda: [0.0] * (len(BUCKETS) + 2))  # buckets, sum, count
        self.llm_calls = 0
        self.llm_cached = 0
        self.rejected_busy = 0
        self.timeouts = 0

    def observe(self, method: str, path: str, status: int, seconds: float) -> None:
        with self._lock:
            self.requests[(method, path, status)] += 1
            h = self.latency[path]
            for i, b in enumerate(BUCKETS):
                if seconds <= b:
                    h[i] += 1
            h[-2] += seconds
            h[-1] += 1

    def add_usage(self, usage: dict[str, Any]) -> None:
        with self._lock:
            self.llm_calls += int(usage.get("calls") or 0)
            self.llm_cached += sum(int(s.get("cached_calls", 0)) for s in (usage.get("stages") or {}).values())

    def render(self) -> str:
        out = ["# HELP medr2_requests_total HTTP requests by route and status.", "# TYPE medr2_requests_total counter"]
        with self._lock:
            for (m, p, s), n in sorted(self.requests.items()):
                out.append(f'medr2_requests_total{{method="{m}",path="{p}",status="{s}"}} {n}')
            out += ["# HELP medr2_request_seconds Request latency by route.", "# TYPE medr2_request_seconds histogram"]
            for p, h in sorted(self.latency.items()):
                for i, b in enumerate(BUCKETS):
                    out.append(f'medr2_request_seconds_bucket{{path="{p}",le="{b}"}} {int(h[i])}')
                out.append(f'medr2_request_seconds_bucket{{path="{p}",le="+Inf"}} {int(h[-1])}')
                out.append(f'medr2_request_seconds_sum{{path="{p}"}} {h[-2]:.6f}')
                out.append(f'medr2_request_seconds_count{{path="{p}"}} {int(h[-1])}')
            out += ["# HELP medr2_llm_calls_total Model calls made for answers.", "# TYPE medr2_llm_calls_total counter",
                    f"medr2_llm_calls_total {self.llm_calls}",
                    "# HELP medr2_llm_cache_hits_total Model calls answered from the cache.",
                    "# TYPE medr2_llm_cache_hits_total counter", f"medr2_llm_cache_hits_total {self.llm_cached}",
                    "# HELP medr2_rejected_busy_total Answers refused because every worker was busy.",
                    "# TYPE medr2_rejected_busy_total counter", f"medr2_rejected_busy_total {self.rejected_busy}",
                    "# HELP medr2_ask_timeouts_total Answers that ran past serve.ask_timeout_s.",
                    "# TYPE medr2_ask_timeouts_total counter", f"medr2_ask_timeouts_total {self.timeouts}"]
        return "\n".join(out) + "\n"


class EngineHolder:
    """The current engine; a write (ingestion, removal) retires it and the next request opens a
    fresh one over the changed index. A retired engine closes once its last request ends. The
    models and the call cache are shared across engines (loaded once).

    ``stamp(engine)``, when given, tells whether the index changed under the engine (another
    process wrote it): each request compares it with the stamp taken when the engine opened
    and, when they differ, retires the engine as a write here does."""

    def __init__(self, factory: Callable[[], Any], stamp: Optional[Callable[[Any], Hashable]] = None):
        self._factory = factory
        self._stamp = stamp
        self._seen: Hashable = None
        self._lock = threading.Lock()
        self._engine = None
        self._refs: dict[int, int] = defaultdict(int)
        self._retired: dict[int, Any] = {}

    @contextmanager
    def use(self) -> Iterator[Any]:
        with self._lock:
            if self._engine is not None and self._stamp is not None and self._stamp(self._engine) != self._seen:
                self._retire()
            if self._engine is None:
                self._engine = self._factory()
                self._seen = self._stamp(self._engine) if self._stamp is not None else None
            e = self._engine
            self._refs[id(e)] += 1
        try:
            yield e
        finally:
            with self._lock:
                self._refs[id(e)] -= 1
                if id(e) in self._retired and self._refs[id(e)] == 0:
                    self._close(self._retired.pop(id(e)))

    def reload(self) -> None:
        with self._lock:
            self._retire()

    def _retire(self) -> None:
        """Drop the current engine (the caller holds the lock); it closes when no request uses it."""
        old, self._engine = self._engine, None
        if old is not None:
            if self._refs[id(old)] == 0:
                self._close(old)
            else:
                self._retired[id(old)] = old

    @staticmethod
    def _close(e) -> None:
        e.index.close()
        if e._graph is not None:
            e._graph.kg.close()

    def close(self) -> None:
        self.reload()


def index_stamp(index: "Index") -> tuple:
    """What every committed write changes, from whichever process: the live segment list, the
    highest passage row id (additions, replacements) and the number of documents (removals)."""
    db = index.store.db
    top = db.execute("SELECT MAX(rowid) FROM passages").fetchone()[0]
    docs = db.execute("SELECT COUNT(*) FROM documents").fetchone()[0]
    return tuple(index.store.segments()), top, docs


class WriterBusy(RuntimeError):
    """Another process holds the index's writer lock (an ingestion or a removal is running)."""


class JobFailed(Exception):
    """Raised by a job that could not do its work: the job is ``failed`` with this message as its
    error and ``detail`` as its detail."""

    def __init__(self, message: str, detail: dict[str, Any]):
        super().__init__(message)
        self.detail = detail


@dataclass
class Job:
    id: str
    kind: str
    status: str = "queued"  # queued | running | done | failed
    created: float = field(default_factory=time.time)
    finished: Optional[float] = None
    detail: dict[str, Any] = field(default_factory=dict)
    error: Optional[str] = None

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "kind": self.kind, "status": self.status, "created": self.created,
                "finished": self.finished, "detail": self.detail, "error": self.error}


class Jobs:
    """Writes run one at a time in a background thread (the index has one writer)."""

    def __init__(self) -> None:
        self._jobs: dict[str, Job] = {}
        self._write = threading.Lock()

    def submit(self, kind: str, fn: Callable[[Job], dict[str, Any]]) -> Job:
        job = Job(uuid.uuid4().hex[:16], kind)
        self._jobs[job.id] = job

        def run() -> None:
            with self._write:
                job.status = "running"
                try:
                    job.detail = fn(job)
                    job.status = "done"
                except JobFailed as e:
                    job.status, job.error, job.detail = "failed", str(e), e.detail
                except Exception as e:  # reported through GET /jobs/{id}
                    job.status, job.error = "failed", f"{type(e).__name__}: {e}"
                finally:
                    job.finished = time.time()

        threading.Thread(target=run, name=f"medr2-job-{job.id}", daemon=True).start()
        return job

    def run_now(self, fn: Callable[[], Any]) -> Any:
        with self._write:
            return fn()

    def get(self, job_id: str) -> Optional[Job]:
        return self._jobs.get(job_id)


@dataclass
class ServeState:
    """Everything one application shares between requests.

    ``config`` is the index's effective configuration (what the routes read, ``serve`` above
    all); ``open_config`` is the one the caller passed to ``create_app`` (None: the index's
    stored one), which every later ``Index.open`` is given, as the engine's is. ``slots`` bounds
    the answers in flight to ``serve.llm_workers``; ``pool`` runs them; ``token`` is the bearer
    token for writes and reviews ("" when writes are off).

    >>> from medr2.config import Config
    >>> st = ServeState.build(Path("idx"), Config(), None, models=None, holder=None, token="")
    >>> st.sv.llm_workers == st.config.serve.llm_workers, st.writes_enabled
    (True, False)
    >>> st.close()
    """

    index_dir: Path
    config: "Config"
    open_config: Optional["Config"]
    models: Optional["Models"]
    holder: Optional[EngineHolder]
    jobs: Jobs
    metrics: Metrics
    pool: ThreadPoolExecutor
    slots: threading.BoundedSemaphore
    token: str

    @classmethod
    def build(cls, index_dir: Path, config: "Config", open_config: Optional["Config"], models: Optional["Models"],
              holder: Optional[EngineHolder], token: str) -> "ServeState":
        """Fresh jobs, counters, worker pool and slots sized by ``config.serve.llm_workers``."""
        n = config.serve.llm_workers
        return cls(index_dir, config, open_config, models, holder, Jobs(), Metrics(),
                   ThreadPoolExecutor(max_workers=n, thread_name_prefix="medr2-llm"), threading.BoundedSemaphore(n),
                   token)

    @property
    def sv(self) -> "ServeConfig":
        """The ``[serve]`` section: limits, workers, timeouts, auth."""
        return self.config.serve

    @property
    def writes_enabled(self) -> bool:
        return bool(self.token)

    def open_index(self, writable: bool = False) -> "Index":
        """The index opened as the engine opens it (a writer for ingestion and removal); a writer
        raises :class:`WriterBusy` while another process holds the writer lock."""
        from medr2.index.index import Index, IndexError_

        try:
            return Index.open(self.index_dir, self.open_config, writable=writable)
        except IndexError_:
            if writable and self.writer_busy():
                raise WriterBusy("the index is being written by another process (an ingestion or a removal); "
                                 "retry when it has finished") from None
            raise

    def writer_busy(self) -> bool:
        """Whether a writer, in any process, holds the index's lock now."""
        from medr2.locks import try_lock

        probe = try_lock(self.index_dir / ".lock", shared=True)
        if probe is None:
            return True
        probe.close()
        return False

    def close(self) -> None:
        """At shutdown: drop queued answers, close the engines, then the shared call cache."""
        self.pool.shutdown(wait=False, cancel_futures=True)
        if self.holder is not None:
            self.holder.close()
        if self.models is not None and self.models.cache is not None:
            self.models.cache.close()
