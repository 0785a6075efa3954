"""mdlm_hf demo: watch Shakespeare (or whatever the model was trained on) emerge from masks.

    python app.py                         # the checkpoint shipped in pretrained/, offline
    python app.py --model user/repo-id    # another local directory or Hub repo (or set MDLM_MODEL)
    python app.py --twin none             # without the autoregressive twin in Compare (or set MDLM_TWIN)

The Space's entry point: arguments, loading, `build_demo`, launch; the app itself is the mdlm_space package."""

from __future__ import annotations

import argparse
import os
import sys

from mdlm_hf.devices import DEVICE_HELP, choose_device, device_problem
from mdlm_space import build_demo, worker
from mdlm_space.loading import (
    DEFAULT_MODEL,
    MODEL_ENV_VAR,
    TWIN_ENV_VAR,
    default_twin,
    load_demo_metadata,
    load_model,
    load_twin,
    mcp_available,
    warm_up,
)
from mdlm_space.render import THEME
from mdlm_space.serving import host_problem, launch_limits, port_number, private_uploads
from mdlm_space.tabs.how_it_works import accuracy_results
from mdlm_space.texts import demo_texts
from mdlm_space.threads import ThreadChooser, model_workload
from mdlm_space.visitors import QUEUE_SLOTS
from mdlm_space.worker import on_model_thread

__all__ = ["build_demo", "main"]


def main(argv: list[str] | None = None) -> None:
    """Loads the model (--model) onto --device and serves the app, as MCP tools too when the MCP extra is here."""
    parser = argparse.ArgumentParser(description="mdlm_hf demo")
    parser.add_argument(
        "--model",
        default=os.environ.get(MODEL_ENV_VAR, str(DEFAULT_MODEL)),
        help=f"local directory or Hub repo id (default: ${MODEL_ENV_VAR} or the shipped checkpoint)",
    )
    parser.add_argument(
        "--twin",
        default=os.environ.get(TWIN_ENV_VAR),
        help=f"the model's autoregressive twin for Compare, a directory or Hub repo id; none: without one (default: "
        f"${TWIN_ENV_VAR}, else the shipped twin beside the shipped model, none beside another model)",
    )
    parser.add_argument("--host", default=None, help="e.g. 0.0.0.0 to serve the network")
    parser.add_argument("--port", type=port_number, default=None, help="1 to 65535 (default: gradio's, from 7860)")
    parser.add_argument("--device", default="auto", help=DEVICE_HELP)
    args = parser.parse_args(argv)
    if args.twin is None:  # the shipped twin belongs to the shipped model only
        args.twin = default_twin(args.model)
    problem = device_problem(args.device) or (host_problem(args.host) if args.host else None)
    if problem:
        sys.exit(f"error: {problem}")
    device = str(choose_device(args.device))
    private_uploads()  # before gradio names its folders
    try:  # the model, then its demo.json and casts.json (read building the app): one clear line, not a traceback
        model, known_words = on_model_thread(load_model, args.model, device)
        metadata = load_demo_metadata(args.model)
    except Exception as error:
        source = args.model if args.model.strip() else repr(args.model)  # "from : ..." would read as a typo
        sys.exit(f"error: could not load the model from {source}: {error}")
    try:
        twin = on_model_thread(load_twin, args.twin, model, device)
    except Exception as error:
        sys.exit(f"error: could not load the twin from {args.twin!r}: {error} (--twin none runs without it)")
    try:
        demo = on_model_thread(build_demo, model, known_words, metadata, twin)
    except ValueError as error:
        sys.exit(f"error: could not build the app for {args.model}: {error}")
    if device == "cpu":  # the thread count that runs a pass fastest on the CPUs as they are now, timed as it runs
        worker.MODEL_THREAD.chooser = ThreadChooser(model_workload(model))
    for warmed in filter(None, (model, twin)):  # while the server starts and the page loads; runs queue behind it
        worker.MODEL_THREAD.submit(warm_up, warmed)
    # How it works' accuracy plot, measured behind the warm-up, a mask ratio at a time, so runs go in between
    accuracy_results(model, on_model_thread(demo_texts, model, metadata).sample)
    try:
        demo.queue(default_concurrency_limit=QUEUE_SLOTS, max_size=64).launch(
            server_name=args.host,
            server_port=args.port,
            mcp_server=mcp_available(),
            theme=THEME,
            **launch_limits(),
        )
    except OSError as error:  # above all, a port that another program holds
        where = f"port {args.port}" if args.port else "gradio's default ports"
        reason = str(error).split(". You can")[0]  # gradio's advice names launch()'s parameters, not our flags
        sys.exit(f"error: could not serve the app on {where} ({reason}); is another program using it? pass --port N")


if __name__ == "__main__":
    main()
