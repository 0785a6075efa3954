"""The ship check's bars (lab/ship_check.py): which figures a candidate must beat or match its incumbent's
on, the verdicts (the best passing candidate of each target ships), and the table that shows them."""

from __future__ import annotations

import math
from pathlib import Path

from lab.ship_figures import LIKELIHOODS, TARGETS

# the bars (tests/test_lab_ship_check.py fails each alone)
SHARE_SLACK = 0.02  # names and same play may fall, empty speeches rise, this much: one seed's sampling noise
INVENTED_SLACK = 1.0  # invented words per 1k may rise this much (sampling noise at 32 texts), the student's too
HEADINGS_SLACK = 0.10  # a heading rate may stray this much further from real text's (as a fraction of its rate)
SPEED_RATIO = 1.2  # a diffusion model's generate(256) may take this times its incumbent's: a wider model is slower
STUDENT_SPEED_RATIO = 0.35  # a student at 8 passes must take at most this of the default's time: worth an option


def no_worse(candidate: float | None, incumbent: float | None, slack: float, higher_is_better: bool) -> bool:
    """Whether a share is no worse than the incumbent's but for `slack`; where either had nothing to count (no
    heading, no two speakers in a row) there is nothing to compare: the heading rate's bar holds a model that
    stopped writing headings."""
    if incumbent is None or candidate is None:
        return True
    return candidate >= incumbent - slack if higher_is_better else candidate <= incumbent + slack


def headings_no_worse(candidate: float | None, incumbent: float | None, reference: float | None) -> bool:
    """Whether a heading rate strays no further from real text's (`reference`, held-out windows') than the
    incumbent's, but for HEADINGS_SLACK: a rate is neither better higher nor lower. No rate where the incumbent has
    one: the candidate could not write that prompt."""
    if candidate is None or incumbent is None or not reference:
        return candidate is not None or incumbent is None
    return abs(candidate / reference - 1) <= abs(incumbent / reference - 1) + HEADINGS_SLACK


def fmt(value: object, digits: int = 4) -> str:
    """A figure in the table: "-" where there is none."""
    if value is None:
        return "-"
    return str(value) if isinstance(value, (bool, str)) else f"{value:.{digits}f}"


def likelihood_checks(figures: dict, names: tuple[str, ...]) -> dict[str, str | None]:
    """Each likelihood must beat (be lower than) the incumbent's: the reason where it does not, else None."""
    checks = {}
    for name in names:
        pair = figures.get(name) or {}
        mine, theirs = pair.get("candidate"), pair.get("incumbent")
        ok = mine is not None and theirs is not None and mine < theirs
        checks[name] = None if ok else f"{name} {fmt(mine)} is not below the incumbent's {fmt(theirs)}"
    return checks


def sampling_checks(figures: dict, reference_headings: float | None) -> dict[str, str | None]:
    """Invented words and every prompt's structure no worse than the incumbent's, within the slacks."""
    checks = {}
    pair = figures.get("invented_per_1k") or {}
    mine, theirs = pair.get("candidate"), pair.get("incumbent")
    ok = no_worse(mine, theirs, INVENTED_SLACK, higher_is_better=False)
    checks["invented_per_1k"] = None if ok else f"invented words per 1k {fmt(mine, 2)} > {fmt(theirs, 2)} + slack"
    for name, pair in figures.items():
        mine, theirs = pair.get("candidate"), pair.get("incumbent")
        figure = name.partition("/")[2]
        if figure in ("real_names", "same_play", "empty_speeches"):
            ok = no_worse(mine, theirs, SHARE_SLACK, higher_is_better=figure != "empty_speeches")
            checks[name] = None if ok else f"{name} {fmt(mine, 3)} is worse than the incumbent's {fmt(theirs, 3)}"
        elif figure == "headings_per_1k":
            ok = headings_no_worse(mine, theirs, reference_headings)
            checks[name] = None if ok else f"{name} {fmt(mine, 1)} is further from real text's than {fmt(theirs, 1)}"
    return checks


def speed_check(figures: dict, ratio: float) -> dict[str, str | None]:
    """generate(256) within `ratio` times the incumbent's time."""
    pair = figures.get("generate_256_s") or {}
    mine, theirs = pair.get("candidate"), pair.get("incumbent")
    ok = mine is not None and theirs is not None and mine <= ratio * theirs
    shown = f"{mine / theirs:.2f}x" if mine is not None and theirs else "?"
    return {"generate_256_s": None if ok else f"generate(256) takes {shown} the incumbent's time (bar: {ratio}x)"}


def decide(objective: str, figures: dict, extra_text: bool, reference_headings: float | None) -> dict[str, str | None]:
    """Every bar the candidate is held to: the figure's name -> None where it passes, else why it fails."""
    if objective == "ar":  # a twin: the same text as the diffusion model, and a better likelihood
        checks = likelihood_checks(figures, ("val_nll",))
        checks["extra_text"] = None if extra_text else "it did not read the diffusion model's text (extra_text)"
        return checks
    checks = sampling_checks(figures, reference_headings)
    if objective == "student":
        return checks | speed_check(figures, STUDENT_SPEED_RATIO)
    return likelihood_checks(figures, LIKELIHOODS["diffusion"]) | checks | speed_check(figures, SPEED_RATIO)


def rank_key(record: dict) -> float:
    """What picks among several winners of one target (lower first): a diffusion model's validation ELBO, a twin's
    NLL, a student's time."""
    figure = {"diffusion": "val_elbo", "ar": "val_nll", "student": "generate_256_s"}[record["objective"]]
    value = (record["figures"].get(figure) or {}).get("candidate")
    return math.inf if value is None else value


def choose_winners(records: dict[str, dict]) -> None:
    """Sets each record's verdict: "ship" for the best passing candidate of its target, else why not."""
    for record in records.values():
        failed = [reason for reason in record["checks"].values() if reason]
        record["failed"] = failed
        record["verdict"] = "keep the incumbent: " + "; ".join(failed) if failed else "ship"
    for target in TARGETS.values():
        # a record's target is the folder's path (pretrained/NAME); TARGETS names the folder
        passing = [r for r in records.values() if Path(r["target"]).name == target and not r["failed"]]
        for record in sorted(passing, key=rank_key)[1:]:
            record["verdict"] = f"passes, but {min(passing, key=rank_key)['run']} is better"


def table(records: dict[str, dict]) -> str:
    """One markdown table of every figure, candidate beside incumbent, and a verdict line per candidate."""
    lines = ["| run | figure | candidate | incumbent | bar |", "|---|---|---|---|---|"]
    for name, record in records.items():
        for figure, pair in record["figures"].items():
            reason = record["checks"].get(figure, "")
            bar = "" if figure not in record["checks"] else ("ok" if reason is None else "FAILS")
            digits = 4 if figure in (*LIKELIHOODS["diffusion"], *LIKELIHOODS["ar"], "generate_256_s") else 3
            mine, theirs = fmt(pair.get("candidate"), digits), fmt(pair.get("incumbent"), digits)
            lines.append(f"| {name} | {figure} | {mine} | {theirs} | {bar} |")
    lines.append("")
    for name, record in records.items():
        against = f"{record['objective']}, against {record['incumbent']}"
        lines.append(f"- {name} ({against}; likelihoods: {record['likelihood_source']}): {record['verdict']}")
    return "\n".join(lines) + "\n"
