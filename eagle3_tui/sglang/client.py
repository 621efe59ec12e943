"""SGLang's HTTP API as the console uses it: health, server info, generate, flush, metrics, a benchmark.

Async httpx, one client per base URL (through an SSH port forward for remote hosts). Parsing of what
comes back is in pure functions so tests need no server. Field names follow SGLang's http_server.py
and tokenizer_manager.py (research/sglang.md §5, §6).
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

import httpx

from eagle3_tui.errors import UserError
from eagle3_tui.formats.openai_answer import CHAT_PATH, read_openai_answer
from eagle3_tui.formats.readers import kind_of, parse_json, sub_object
from eagle3_tui.sglang.promtext import MetricSample, read_samples_lenient
from eagle3_tui.sglang.requests import ALL, SetAccept, accept_by_set, percentile

# Built-in benchmark prompts: short, varied, plain English (the sim's tokenizer and real models alike).
BUILTIN_PROMPTS: tuple[str, ...] = (
    "Explain in simple words how a bicycle stays upright while it moves.",
    "Write a short story about a lighthouse keeper who finds a message in a bottle.",
    "List five practical tips for keeping a small vegetable garden healthy.",
    "Describe the water cycle to a ten year old.",
    "What are the main differences between a list and a tuple in Python?",
    "Summarize the plot of a heist movie in three sentences.",
    "Give a recipe for a simple tomato soup with the steps numbered.",
    "Why do we have seasons on Earth? Answer in one paragraph.",
    "Write a polite email asking a colleague to review a pull request.",
    "Explain what a hash table is and when to use one.",
    "Describe a walk through a busy market early in the morning.",
    "What should a beginner know before running their first marathon?",
    "Translate the idea of compound interest into an everyday example.",
    "Write a haiku about rain on a tin roof, then explain its imagery.",
    "How does a refrigerator keep food cold?",
    "Compare trains and airplanes for a trip of five hundred kilometres.",
)


class ServerUnavailable(UserError):
    """The server did not answer (connection refused, timeout, 5xx)."""


class Unauthorized(UserError):
    """HTTP 401: the server runs with --api-key and the key was missing or wrong."""


def base_url(host: str, port: int, *, tls: bool = False) -> str:
    """`http://host:port`, or https when the server was started with --ssl-certfile (0.5.12+)."""
    shown = f"[{host}]" if ":" in host and not host.startswith("[") else host
    return f"{'https' if tls else 'http'}://{shown}:{port}"


def auth_headers(api_key: str | None) -> dict[str, str]:
    """SGLang's --api-key check: every endpoint but /health and /metrics wants `Authorization: Bearer KEY`."""
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


@dataclass(frozen=True)
class Metrics:
    """A parsed Prometheus exposition (`/metrics`, mounted only with `--enable-metrics`)."""

    samples: tuple[MetricSample, ...]

    def get(self, name: str, default: float | None = None) -> float | None:
        """The value of `name` (mean over label sets, e.g. several TP ranks)."""
        vals = self._values(name)
        return sum(vals) / len(vals) if vals else default

    def total(self, name: str, default: float | None = None) -> float | None:
        """The sum of `name` over label sets (throughputs of several DP ranks add up)."""
        vals = self._values(name)
        return sum(vals) if vals else default

    def _values(self, name: str) -> list[float]:
        return [s.value for s in self.samples if s.name == name and not math.isnan(s.value)]

    def names(self) -> set[str]:
        return {s.name for s in self.samples}


@dataclass(frozen=True)
class GenerateResult:
    text: str
    latency_s: float
    completion_tokens: int
    meta_info: dict[str, Any]
    spec_tokens: int | None = None
    """The tokens its verify steps produced (vLLM: steps + accepted drafts, its prefill token aside); None:
    completion_tokens (SGLang counts every output token against its verify steps)."""
    per_position: tuple[float, ...] = ()
    """The fraction of its verify steps that accepted each draft position (where the engine says it)."""

    @property
    def spec_verify_ct(self) -> int | None:
        v = self.meta_info.get("spec_verify_ct")
        return int(v) if isinstance(v, (int, float)) else None

    @property
    def spec_accept_length(self) -> float | None:
        """Tokens per verify step for this request (older builds: completion_tokens / spec_verify_ct)."""
        v = self.meta_info.get("spec_accept_length")
        if isinstance(v, (int, float)) and v > 0:
            return float(v)
        ct = self.spec_verify_ct
        if ct:
            return self.completion_tokens / ct
        return None


@dataclass
class BenchResult:
    """One benchmark run: client-side numbers plus what the server and its log said meanwhile."""

    num_prompts: int
    concurrency: int
    max_tokens: int
    ok: int
    errors: int
    duration_s: float
    output_tokens: int
    output_tps: float
    latency_p50_s: float | None
    latency_p90_s: float | None
    accept_len_client: float | None  # Σ completion_tokens / Σ spec_verify_ct over the requests
    spec_verify_ct: int
    accept_len_server: float | None = None  # /server_info avg_spec_accept_length after the run
    accept_len_log: float | None = None  # mean of the log's `accept len` during the window (session)
    baseline: bool = False
    started_at: float = 0.0
    error_messages: list[str] = field(default_factory=list)
    prompt_format: str = "raw"
    """"chat": each prompt sent as one user turn in the served chat template; "raw": as bare text."""
    chat_template: str | None = None
    """Which template and how it was sent (rendered here to /generate, or the server's /v1/chat/completions)."""
    sets: list[SetAccept] = field(default_factory=list)
    """Per-request accept length by prompt set (the requests whose answer carried it)."""
    published_accept_len: float | None = None
    published_source: str | None = None
    """The draft's published accept length (its config or model card) and where it was read."""
    per_position: list[float] = field(default_factory=list)
    """Per-position acceptance over the requests that report it (vLLM), weighted by their verify steps."""

    @property
    def accept_len(self) -> float | None:
        """The benchmark's accept length: its own requests' (meta_info), else the log's window, else the server's."""
        for v in (self.accept_len_client, self.accept_len_log, self.accept_len_server):
            if v is not None:
                return v
        return None

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["accept_len"] = self.accept_len
        d["error_messages"] = self.error_messages[:5]
        d["sets"] = [x.to_dict() for x in self.sets]
        return d


@dataclass
class ChatMode:
    """How a benchmark sends chat. The server's own /v1/chat/completions is exact (its template, its tokens)
    and is used where it answers each request's spec fields (`sglext.spec_tokens_details`, SGLang 0.5.20+);
    elsewhere `render` turns a prompt into the served template's text, sent to /generate, whose meta_info has
    them on every release (the tokenizer then adds its BOS in front, one token more than the chat endpoint's).
    `template` says which template; `route` is set by the benchmark once it knows."""

    template: str
    render: Callable[[str], str] | None = None
    route: str = ""

    def describe(self) -> str:
        how = {"endpoint": "sent to /v1/chat/completions (the server applies it)",
               "render": "rendered here, sent to /generate"}.get(self.route, "")
        return f"{self.template}; {how}" if how else self.template


# ---------------------------------------------------------------- pure parsing


def parse_prometheus(text: str) -> Metrics:
    """The Prometheus text format, read with prometheus_client's parser (promtext); a line it cannot read
    is skipped, never fatal."""
    return Metrics(tuple(read_samples_lenient(text)))


def unwrap_server_info(info: Any) -> dict[str, Any]:
    """PD routers wrap the answer as {"decode": [{...}]}; return the plain dict."""
    if isinstance(info, dict) and isinstance(info.get("decode"), list) and info["decode"]:
        first = info["decode"][0]
        if isinstance(first, dict):
            return first
    if not isinstance(info, dict):
        raise UserError("the server's /server_info answer is not a JSON object")
    return info


def server_accept_length(info: Mapping[str, Any]) -> float | None:
    """`avg_spec_accept_length` over the DP ranks' `internal_states` (weighted by each rank's throughput),
    or the top-level key of builds before 2025-05; None if absent."""
    ranks = rank_stats(info)
    if ranks:
        return aggregate_ranks(ranks)[0]
    v = info.get("avg_spec_accept_length")
    return float(v) if isinstance(v, (int, float)) else None


def rank_stats(info: Mapping[str, Any]) -> list[tuple[float | None, float | None]]:
    """(avg_spec_accept_length, last_gen_throughput) of each `internal_states` entry (one per DP rank)."""
    states = info.get("internal_states")
    out: list[tuple[float | None, float | None]] = []
    for st in states if isinstance(states, list) else []:
        if not isinstance(st, dict):
            continue
        acc, tps = st.get("avg_spec_accept_length"), st.get("last_gen_throughput")
        out.append((float(acc) if isinstance(acc, (int, float)) else None,
                    float(tps) if isinstance(tps, (int, float)) else None))
    return [r for r in out if r[0] is not None or r[1] is not None]


def aggregate_ranks(ranks: Sequence[tuple[float | None, float | None]]) -> tuple[float | None, float | None]:
    """(accept length, tok/s) of a DP server from its ranks' (accept length, tok/s): throughputs add up,
    the accept length is their throughput-weighted mean (a plain mean when no rank reports tok/s)."""
    tps = [t for _, t in ranks if t is not None]
    total = sum(tps) if tps else None
    weighted = [(a, t) for a, t in ranks if a is not None and t is not None and t > 0]
    if weighted:
        return sum(a * t for a, t in weighted) / sum(t for _, t in weighted), total
    accs = [a for a, _ in ranks if a is not None]
    return (sum(accs) / len(accs) if accs else None), total


def _json_answer(r: httpx.Response, path: str) -> Any:
    """The JSON of a server's answer to `path` (readers.parse_json's limits); UserError when it is not JSON."""
    try:
        return parse_json(r.content, f"the server's {path} answer")
    except json.JSONDecodeError:
        raise UserError(f"the server's {path} answer is not JSON") from None


def error_message(text: str) -> str:
    """An error answer's message: `error.message` (OpenAI style), `message` or `detail`, else its text; one line."""
    msg: Any = None
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if isinstance(data, dict):
        err = data.get("error")
        msg = err.get("message") if isinstance(err, dict) else err if isinstance(err, str) else None
        msg = msg or data.get("message") or data.get("detail")
    shown = str(msg) if isinstance(msg, str) and msg else text
    return " ".join(shown.split())[:200]


def chat_result(data: Any, latency_s: float) -> GenerateResult:
    """A chat completion as a GenerateResult: usage's completion tokens, and the spec fields of
    `sglext.spec_tokens_details` (a dict, or a list with one per choice) or of `choices[0].meta_info`.
    UserError (one sentence) for an answer without choices."""
    answer = read_openai_answer(data, CHAT_PATH)
    info = answer.choice.get("meta_info")
    meta: dict[str, Any] = dict(info) if isinstance(info, Mapping) else {}
    ext = data.get("sglext")
    details = ext.get("spec_tokens_details") if isinstance(ext, dict) else None
    if isinstance(details, list):
        details = details[0] if details else None
    if isinstance(details, dict):
        meta.update({k: v for k, v in details.items() if k.startswith("spec_")})
    ct = answer.completion_tokens if answer.completion_tokens is not None else meta.get("completion_tokens")
    return GenerateResult(text=answer.text, latency_s=latency_s,
                          completion_tokens=int(ct) if isinstance(ct, (int, float)) else 0, meta_info=meta)


SET_KEYS = ("set", "category", "subset", "dataset", "source", "task")
"""Fields a prompts file may name each prompt's set by (MT-Bench's `category`, a mix's `dataset`/`source`)."""
DEFAULT_SET = ALL


@dataclass(frozen=True)
class Prompt:
    """One benchmark prompt and the set it belongs to (its accept length is summarised per set)."""

    text: str
    set: str = DEFAULT_SET


def load_prompts(text: str) -> list[str]:
    """Prompts from a file: JSON lines with "prompt"/"text", a JSON list, or one prompt per line."""
    return [p.text for p in load_prompt_sets(text)]


def load_prompt_sets(text: str) -> list[Prompt]:
    """`load_prompts` with each prompt's set: an object's "set" (or "category", "subset", "dataset",
    "source", "task") field; a prompt without one (a plain line, a string) is in the set "all"."""
    stripped = text.strip()
    if not stripped:
        raise UserError("the prompts file is empty")
    if stripped.startswith("["):
        try:
            data = json.loads(stripped)
        except json.JSONDecodeError as err:
            raise UserError(f"the prompts file is not valid JSON: {err.msg} (line {err.lineno})") from None
        out = [_prompt_in_set(x) for x in data]
        out = [p for p in out if p.text]
    else:
        out = []
        for n, line in enumerate(stripped.splitlines(), 1):
            line = line.strip()
            if not line:
                continue
            if line.startswith("{"):
                try:
                    p = _prompt_in_set(json.loads(line))
                except json.JSONDecodeError:
                    raise UserError(f"prompts file line {n} is not valid JSON") from None
                if p.text:
                    out.append(p)
            else:
                out.append(Prompt(line))
    if not out:
        raise UserError("the prompts file holds no prompts")
    return out


def _prompt_in_set(item: Any) -> Prompt:
    text = _prompt_of(item)
    if isinstance(item, dict):
        for key in SET_KEYS:
            v = item.get(key)
            if isinstance(v, (str, int)) and not isinstance(v, bool) and str(v).strip():
                return Prompt(text, str(v).strip())
    return Prompt(text)


def _prompt_of(item: Any) -> str:
    if isinstance(item, str):
        return item
    if isinstance(item, dict):
        for key in ("prompt", "text", "input"):
            if isinstance(item.get(key), str):
                return item[key]
        turns = item.get("turns")  # MT-Bench's question.jsonl: the first turn
        if isinstance(turns, list) and turns and isinstance(turns[0], str):
            return turns[0]
    raise UserError("each prompt must be a string or an object with a \"prompt\", \"text\" or \"turns\" field")


# ---------------------------------------------------------------- the client


class SGLangClient:
    """Async client for one SGLang server."""

    def __init__(
        self,
        base_url: str,
        *,
        timeout: float = 60.0,
        client: httpx.AsyncClient | None = None,
        api_key: str | None = None,
        verify: bool = True,
    ):
        """`api_key`: the server's --api-key (sent as a Bearer token); `verify=False` accepts any TLS
        certificate (only when asked: a self-signed --ssl-certfile)."""
        self.base_url = base_url.rstrip("/")
        self._own = client is None
        self._headers = auth_headers(api_key)
        self._http = client or httpx.AsyncClient(base_url=self.base_url, timeout=timeout, trust_env=False,
                                                 verify=verify)
        self._info_path: str | None = None

    async def __aenter__(self) -> SGLangClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._own:
            await self._http.aclose()

    async def _request(self, method: str, path: str, **kw: Any) -> httpx.Response:
        try:
            r = await self._http.request(method, self.base_url + path, headers=self._headers, **kw)
        except httpx.TimeoutException:
            raise ServerUnavailable(f"the server at {self.base_url} did not answer {path} in time") from None
        except httpx.HTTPError as err:
            raise ServerUnavailable(f"cannot reach the server at {self.base_url} ({type(err).__name__})") from None
        if r.status_code == 401:
            given = "a wrong API key" if self._headers else "no API key"
            raise Unauthorized(f"the server at {self.base_url} answered 401 to {path} with {given}: it runs with "
                               "--api-key; give the same key (api_key in the host's profile, or EAGLE3_TUI_API_KEY)")
        return r

    async def health(self, timeout: float = 25.0) -> bool:
        """True when /health answers 200 (it runs a 1-token generate); never raises."""
        try:
            r = await self._http.get(self.base_url + "/health", timeout=timeout, headers=self._headers)
        except httpx.HTTPError:
            return False
        return r.status_code == 200

    async def get_json(self, path: str) -> Any:
        """A GET answered with JSON (another engine's `/version`); UserError when it is not."""
        r = await self._request("GET", path)
        if r.status_code != 200:
            raise ServerUnavailable(f"the server at {self.base_url} answered HTTP {r.status_code} to {path}")
        return _json_answer(r, path)

    async def post_json(self, path: str, body: Mapping[str, Any]) -> tuple[Any, float]:
        """A POST answered 200 with JSON, and its latency; ServerUnavailable with the server's own error
        message (an OpenAI-style `{"error": {"message": ...}}`) otherwise."""
        t0 = time.perf_counter()
        r = await self._request("POST", path, json=dict(body))
        dt = time.perf_counter() - t0
        if r.status_code != 200:
            raise ServerUnavailable(f"{path} answered HTTP {r.status_code}: {error_message(r.text)}")
        return _json_answer(r, path), dt

    async def server_info(self) -> dict[str, Any]:
        """`/server_info`, or `/get_server_info` on builds before 0.5.6 (remembered once found)."""
        paths = [self._info_path] if self._info_path else ["/server_info", "/get_server_info"]
        last = 0
        for path in paths:
            r = await self._request("GET", path)
            if r.status_code == 200:
                self._info_path = path
                return unwrap_server_info(_json_answer(r, path))
            last = r.status_code
            if r.status_code != 404:
                break
        raise ServerUnavailable(f"the server at {self.base_url} answered HTTP {last} to /server_info")

    async def generate(
        self,
        text: str | None = None,
        *,
        input_ids: list[int] | None = None,
        max_new_tokens: int = 64,
        temperature: float = 0.0,
        ignore_eos: bool = True,
        extra_sampling: Mapping[str, Any] | None = None,
    ) -> GenerateResult:
        """POST /generate (not streamed); meta_info carries the spec fields on the final answer."""
        sampling: dict[str, Any] = {
            "max_new_tokens": max_new_tokens,
            "temperature": temperature,
            "ignore_eos": ignore_eos,
        }
        sampling.update(extra_sampling or {})
        body: dict[str, Any] = {"sampling_params": sampling}
        if input_ids is not None:
            body["input_ids"] = input_ids
        else:
            body["text"] = text or ""
        t0 = time.perf_counter()
        r = await self._request("POST", "/generate", json=body)
        dt = time.perf_counter() - t0
        if r.status_code != 200:
            raise ServerUnavailable(f"/generate answered HTTP {r.status_code}: {r.text[:200].strip()}")
        data = _json_answer(r, "/generate")
        if isinstance(data, list):
            data = data[0] if data else {}
        if not isinstance(data, dict):
            raise UserError(f"the server's /generate answer is a JSON {kind_of(data)}, not an object")
        meta = sub_object(data, "meta_info", "the server's /generate answer")
        ct = meta.get("completion_tokens")
        return GenerateResult(
            text=str(data.get("text", "")),
            latency_s=float(meta.get("e2e_latency", dt)) if isinstance(meta.get("e2e_latency"), (int, float)) else dt,
            completion_tokens=int(ct) if isinstance(ct, (int, float)) else 0,
            meta_info=dict(meta),
        )

    async def chat(self, prompt: str, *, max_tokens: int = 64, temperature: float = 0.0,
                   ignore_eos: bool = True) -> GenerateResult:
        """POST /v1/chat/completions, one user turn; the server applies its own chat template. Asks for the
        per-request spec fields (`return_spec_tokens_details`, SGLang 0.5.20+: `sglext.spec_tokens_details`);
        older releases ignore the field and the result has no per-request accept length."""
        body = {"model": "default", "messages": [{"role": "user", "content": prompt}], "max_tokens": max_tokens,
                "temperature": temperature, "ignore_eos": ignore_eos, "return_spec_tokens_details": True}
        t0 = time.perf_counter()
        r = await self._request("POST", CHAT_PATH, json=body)
        dt = time.perf_counter() - t0
        if r.status_code == 404:
            raise UserError(f"the server at {self.base_url} has no /v1/chat/completions and no chat template was "
                            "read from its tokenizer: benchmark with --raw")
        if r.status_code != 200:
            raise ServerUnavailable(f"/v1/chat/completions answered HTTP {r.status_code}: {r.text[:200].strip()}")
        return chat_result(_json_answer(r, CHAT_PATH), dt)

    async def flush_cache(self) -> bool:
        """POST /flush_cache; False when the server refused (requests still running)."""
        r = await self._request("POST", "/flush_cache")
        if r.status_code == 405:
            r = await self._request("GET", "/flush_cache")
        return r.status_code == 200

    async def metrics(self) -> Metrics:
        """/metrics parsed; an empty Metrics when the server runs without --enable-metrics."""
        r = await self._request("GET", "/metrics")
        if r.status_code != 200:
            return Metrics(())
        return parse_prometheus(r.text)

    async def metrics_text(self) -> tuple[int, str]:
        """/metrics as sent: (HTTP status, body); 404 when the server runs without --enable-metrics."""
        r = await self._request("GET", "/metrics")
        return r.status_code, r.text


async def _send(client: SGLangClient, text: str, chat: ChatMode | None, max_tokens: int) -> GenerateResult:
    """One benchmark request: raw to /generate, the server's chat endpoint, or rendered chat to /generate."""
    if chat is None:
        return await client.generate(text, max_new_tokens=max_tokens)
    if chat.route == "render" and chat.render is not None:
        return await client.generate(chat.render(text), max_new_tokens=max_tokens)
    return await client.chat(text, max_tokens=max_tokens)


async def choose_chat_route(client: SGLangClient, chat: ChatMode, prompt: str) -> None:
    """One short chat request: the endpoint where its answer carries the per-request spec fields (or where
    nothing can be rendered here), else rendering here. A template that cannot render is one error now."""
    if chat.render is None:
        chat.route = "endpoint"
        return
    chat.render(prompt)
    try:
        probe = await client.chat(prompt, max_tokens=2)
    except UserError:  # no chat endpoint (404), or it refused (no template on its side)
        chat.route = "render"
        return
    chat.route = "endpoint" if probe.spec_verify_ct is not None else "render"


class Sender(Protocol):
    """How a benchmark's requests reach one engine's API: the seam between the engine-neutral benchmark loop
    and an engine's endpoints. `prompt_format` is "chat" or "raw"; `describe()` says which template and how
    it was sent (None for raw)."""

    prompt_format: str

    async def prepare(self, client: SGLangClient, first: str) -> None:
        """Once before the run (a route probe, the served model's name); UserError stops the run."""

    async def flush(self, client: SGLangClient) -> None:
        """Empty the server's prefix cache where it can; never raises."""

    async def send(self, client: SGLangClient, text: str, max_tokens: int) -> GenerateResult:
        """One request; UserError (ServerUnavailable included) counts it failed."""

    def describe(self) -> str | None: ...


class SGLangSender:
    """SGLang: raw to /generate; chat to its /v1/chat/completions or rendered here to /generate (`ChatMode`)."""

    def __init__(self, chat: ChatMode | None) -> None:
        self.chat = chat
        self.prompt_format = "raw" if chat is None else "chat"

    async def prepare(self, client: SGLangClient, first: str) -> None:
        if self.chat is not None:
            await choose_chat_route(client, self.chat, first)

    async def flush(self, client: SGLangClient) -> None:
        try:
            await client.flush_cache()
        except ServerUnavailable:
            pass

    async def send(self, client: SGLangClient, text: str, max_tokens: int) -> GenerateResult:
        return await _send(client, text, self.chat, max_tokens)

    def describe(self) -> str | None:
        return None if self.chat is None else self.chat.describe()


def weighted_positions(results: Sequence[GenerateResult]) -> list[float]:
    """Per-position acceptance over requests, each weighted by its verify steps (the counters' ratio)."""
    rows = [(r.per_position, r.spec_verify_ct or 0) for r in results if r.per_position and r.spec_verify_ct]
    steps = sum(n for _, n in rows)
    width = max((len(p) for p, _ in rows), default=0)
    if not steps:
        return []
    return [sum(p[i] * n for p, n in rows if i < len(p)) / steps for i in range(width)]


async def run_benchmark(
    client: SGLangClient,
    prompts: Sequence[str | Prompt] | None = None,
    *,
    num_prompts: int | None = None,
    concurrency: int = 4,
    max_tokens: int = 128,
    flush: bool = True,
    baseline: bool = False,
    on_progress: Callable[[int, int], None] | None = None,
    chat: ChatMode | None = None,
    sender: Sender | None = None,
) -> BenchResult:
    """Send N prompts with at most C in flight; client tok/s, latency p50/p90, spec fields.

    `chat`: each prompt as one user turn in the served chat template (rendered here and sent to /generate,
    which answers every release's per-request spec fields; else the server's /v1/chat/completions);
    None sends the prompts raw. `sender`: another engine's requests (it replaces `chat`). Failed requests are counted, not fatal; a run where every request failed
    raises ServerUnavailable.
    """
    base = [p if isinstance(p, Prompt) else Prompt(p) for p in (prompts or BUILTIN_PROMPTS)]
    n = num_prompts if num_prompts is not None else len(base)
    if n <= 0 or concurrency <= 0 or max_tokens <= 0:
        raise UserError("benchmark needs positive -n, -c and --max-tokens")
    work = [base[i % len(base)] for i in range(n)]
    how: Sender = sender if sender is not None else SGLangSender(chat)
    await how.prepare(client, work[0].text)
    if flush:
        await how.flush(client)
    queue: asyncio.Queue[Prompt] = asyncio.Queue()
    for p in work:
        queue.put_nowait(p)
    results: list[GenerateResult] = []
    per_request: list[tuple[str, float]] = []
    errors: list[str] = []
    done = 0

    async def worker() -> None:
        nonlocal done
        while True:
            try:
                prompt = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            try:
                got = await how.send(client, prompt.text, max_tokens)
                results.append(got)
                if got.spec_verify_ct and got.spec_accept_length is not None:
                    per_request.append((prompt.set, got.spec_accept_length))
            except UserError as err:
                errors.append(str(err))
            done += 1
            if on_progress:
                on_progress(done, n)

    started = time.time()
    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(min(concurrency, n))))
    duration = time.perf_counter() - t0
    if not results:
        raise ServerUnavailable(f"every benchmark request failed: {errors[0] if errors else 'no answer'}")
    out_tokens = sum(r.completion_tokens for r in results)
    verify = sum(r.spec_verify_ct or 0 for r in results)
    spec_tokens = sum(r.completion_tokens if r.spec_tokens is None else r.spec_tokens
                      for r in results if r.spec_verify_ct)
    lat = [r.latency_s for r in results]
    server_len: float | None = None
    try:
        server_len = server_accept_length(await client.server_info())
    except UserError:
        server_len = None
    return BenchResult(
        num_prompts=n,
        concurrency=concurrency,
        max_tokens=max_tokens,
        ok=len(results),
        errors=len(errors),
        duration_s=duration,
        output_tokens=out_tokens,
        output_tps=out_tokens / duration if duration > 0 else 0.0,
        latency_p50_s=percentile(lat, 50),
        latency_p90_s=percentile(lat, 90),
        accept_len_client=spec_tokens / verify if verify else None,
        spec_verify_ct=verify,
        accept_len_server=server_len,
        baseline=baseline,
        started_at=started,
        error_messages=errors,
        prompt_format=how.prompt_format,
        chat_template=how.describe(),
        sets=accept_by_set(per_request),
        per_position=weighted_positions(results),
    )
