"""The app's start-up time, and Generate's time to first streamed frame and to the final text, through gradio_client.

python -m benchmarks.app_latency [--model DIR] [--length 256] [--repeats 5]
python -m benchmarks.app_latency --score [--length 256] [--repeats 3]   # Score: batched against one pass a char
python -m benchmarks.app_latency --versus-library --repeats 10           # /generate against MDLM.generate

Three ways of serving Generate are timed side by side, one run of each per repeat, the order rotating: the app
before the speed work (the exact fp32 model, 64 steps and that time's reveal rule: prior weight 0.35, remask ratio
0.75), the previous default (32 steps of confidence order with prior weight and remasking, on the fast path,
mdlm_hf.fast) and the app's default (SamplerOptions(): 32 steps of streams order, on the fast path).

With --score, the Score tab is timed instead on the first `--length` characters of Sonnet 18 repeated: the app's
batched chain on the fast path (SCORE_BATCH characters per forward pass, bf16 weights where faster), the same chain
on the exact fp32 forward, and one forward pass per character (the app before both), interleaved with
`generate(256)`, whose time scales the figures to the machine the 2 s target was set on; the exact two compute the
same canvases on the same weights, so their bits must agree.
"""

from __future__ import annotations

import argparse
import statistics
import time
import urllib.request

from gradio_client import Client

from mdlm_hf import MDLM, SamplerOptions
from mdlm_hf.pipeline import default_options
from mdlm_hf.sampling.options import OPTION_SPECS
from mdlm_space import build_demo, handlers, worker
from mdlm_space.texts import SONNET_18
from studio.common import free_port, load_model
from studio.rules import rule_options

# Generate's sampling controls, as the app's API takes them (top_p 1.0 and min_p 0 are off)
RULE = (
    "num_steps",
    "order",
    "temperature",
    "top_p",
    "min_p",
    "order_temperature",
    "prior_weight",
    "remask_ratio",
    "spacing",
)


def controls(options: SamplerOptions) -> dict:
    """Generate's controls set to `options`."""
    return {name: OPTION_SPECS[name].shown(getattr(options, name)) for name in RULE}


# the defaults until the speed work: 64 steps, confidence order, prior 0.35, remask 0.75, spacing off
BEFORE = controls(
    SamplerOptions.plain(order="confidence", num_steps=64, order_temperature=0.25, prior_weight=0.35, remask_ratio=0.75)
)
PREVIOUS = controls(rule_options("previous"))
RECOMMENDED = controls(SamplerOptions())
WAYS = {  # name -> (the model's fast switch, Generate's controls)
    "before: exact fp32, 64 steps": (False, BEFORE),
    "previous default: fast, confidence": (True, PREVIOUS),
    "app default: fast path, recommended": (True, RECOMMENDED),
}


def serve(model: MDLM) -> tuple[object, str, float]:
    """Builds and launches the app on a free port; returns it, its URL and the seconds until the page is served."""
    start = time.perf_counter()
    demo = worker.on_model_thread(build_demo, model)  # as app.main does: every torch call on the app's model thread
    port = free_port()
    demo.queue().launch(server_port=port, prevent_thread_lock=True, quiet=True)
    url = f"http://127.0.0.1:{port}/"
    urllib.request.urlopen(url, timeout=60).read()
    return demo, url, time.perf_counter() - start


def timed_generate(client: Client, length: int, controls: dict, seed: int) -> tuple[float, float, int]:
    """Seconds to the first streamed frame and to the final text, and the number of frames."""
    start = time.perf_counter()
    job = client.submit(prompt="", length=length, seed=seed, fixed_seed=True, **controls, api_name="/generate")
    count, first_at = 0, None
    for _ in job:
        count += 1
        first_at = first_at or time.perf_counter() - start
    return first_at, time.perf_counter() - start, count


def timed_score(client: Client, text: str, batch: int, fast: bool) -> tuple[float, str]:
    """Seconds for Score to finish `text` with `batch` characters per forward pass (on the fast path or the exact
    fp32 forward), and its summary."""
    handlers.SCORE_BATCH, handlers.SCORE_FAST = batch, fast  # the handler reads them at each call
    start = time.perf_counter()
    _, summary = client.predict(text=text, api_name="/score")
    return time.perf_counter() - start, summary


SCORE_WAYS = {  # name -> (characters per forward pass, fast path)
    f"the app: {handlers.SCORE_BATCH} per pass, fast path": (handlers.SCORE_BATCH, True),
    "32 per pass, fast path": (32, True),
    "32 per pass, exact fp32 (sessions 5-7)": (32, False),
    "1 per pass, exact fp32 (before)": (1, False),
}


def bits_of(summary: str) -> float:
    """The bits per character a Score summary reports (its first bold figure)."""
    return float(summary.split("**")[1].split()[0])


def score_main(client: Client, model: MDLM, length: int, repeats: int) -> None:
    """Score's time in each of SCORE_WAYS and `generate(256)`'s, interleaved (the first round warms up); the ratio
    to `generate(256)` carries the 2 s target over from the machine it was set on (0.34 s for `generate(256)`)."""
    text = (SONNET_18 * (1 + length // len(SONNET_18)))[:length]
    app_way = (handlers.SCORE_BATCH, handlers.SCORE_FAST)
    ways = [*SCORE_WAYS, "generate(256)"]
    times: dict[str, list[float]] = {way: [] for way in ways}
    results: dict[str, str] = {}
    for repeat in range(repeats + 1):
        for way in ways[repeat % len(ways) :] + ways[: repeat % len(ways)]:
            if way == "generate(256)":
                start = time.perf_counter()
                worker.on_model_thread(model.generate, 256, seed=repeat)
                seconds = time.perf_counter() - start
            else:
                seconds, results[way] = timed_score(client, text, *SCORE_WAYS[way])
            if repeat:
                times[way].append(seconds)
    handlers.SCORE_BATCH, handlers.SCORE_FAST = app_way
    exact = [bits_of(results[way]) for way in SCORE_WAYS if not SCORE_WAYS[way][1]]
    assert len(set(exact)) == 1, results  # the same canvases on the same weights: the same bits
    print(f"Score of {length} characters of Sonnet 18, {repeats} runs each, interleaved (median)")
    for way, summary in results.items():
        print(f"  {way}: {summary}")
    generate = statistics.median(times["generate(256)"])
    for way in SCORE_WAYS:
        seconds = statistics.median(times[way])
        print(
            f"{way:38s} {seconds:6.2f} s, {seconds / generate:5.1f}x generate(256); where generate(256) takes "
            f"0.34 s: {0.34 * seconds / generate:.2f} s"
        )
    print(f"generate(256): {generate:.2f} s")


def versus_library(client: Client, model: MDLM, length: int, repeats: int) -> dict[str, float]:
    """`/generate` at the page's defaults against `MDLM.generate` at the model's (`default_options`) on the app's
    model thread, interleaved, after a warm-up of each; the medians and their ratio, printed."""
    options, times = default_options(model), {"library": [], "api": []}
    for repeat in range(repeats + 1):
        started = time.perf_counter()
        worker.on_model_thread(model.generate, length, options, seed=repeat)
        library = time.perf_counter() - started
        _, api, _ = timed_generate(client, length, {"end_at": "length"}, seed=repeat)
        if repeat:
            times["library"].append(library)
            times["api"].append(api)
    medians = {way: statistics.median(seconds) for way, seconds in times.items()}
    ratio = medians["api"] / medians["library"]
    print(f"{length} characters, {repeats} runs each, interleaved (median): MDLM.generate {medians['library']:.3f} s,")
    print(f"/generate through gradio_client {medians['api']:.3f} s: {ratio:.2f}x")
    return {**medians, "ratio": ratio}


def main(argv: list[str] | None = None) -> None:
    """Parses the flags and times the app's start-up and Generate (or, with --score, the Score tab)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=None)
    parser.add_argument("--length", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--score", action="store_true", help="time the Score tab instead of Generate")
    parser.add_argument("--versus-library", action="store_true", help="/generate against MDLM.generate")
    args = parser.parse_args(argv)
    model, source = worker.on_model_thread(load_model, args.model)
    demo, url, start_up = serve(model)
    client = Client(url, verbose=False)
    if args.versus_library or args.score:  # one measurement instead of Generate's three ways
        try:
            (versus_library if args.versus_library else score_main)(client, model, args.length, args.repeats)
        finally:
            demo.close()
        return
    ways = list(WAYS)
    times = {way: {"first": [], "final": [], "frames": []} for way in ways}
    try:
        for repeat in range(args.repeats + 1):  # the first round warms up (and times the fast path's choice)
            for way in ways[repeat % len(ways) :] + ways[: repeat % len(ways)]:
                fast, controls = WAYS[way]
                model.fast = fast  # the app's handlers sample with this very model
                first, final, frames = timed_generate(client, args.length, controls, seed=repeat)
                if repeat:
                    for key, value in zip(("first", "final", "frames"), (first, final, frames), strict=True):
                        times[way][key].append(value)
    finally:
        demo.close()
    print(f"model: {source}; length {args.length}, {args.repeats} runs each, interleaved (median)")
    print(f"start-up (build_demo + launch until the page is served): {start_up:.2f} s")
    before = statistics.median(times[ways[0]]["final"])
    for way, measured in times.items():
        final = statistics.median(measured["final"])
        print(
            f"{way:38s} first frame {statistics.median(measured['first']):.3f} s, final text {final:.3f} s "
            f"({statistics.median(measured['frames']):.0f} frames), {before / final:.2f}x as fast as before"
        )


if __name__ == "__main__":
    main()
