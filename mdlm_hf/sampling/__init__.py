"""Sampling: the options of a run and the diffusion model's writer, one concept a file.

Read reference.py first: the sampling loop in one function, its lines [predict] [draw] [score] [count] [reveal];
every other module names the line it extends. options.py holds `SamplerOptions`; loop.py is the writer (the
reference's loop over windows, blocks and steps), step.py one of its steps, state.py the `SamplerState` it yields.
The options' parts: drawing.py (temperature, top-k, top-p, min-p), orders.py (which masked positions go first),
schedule.py (how many a step reveals, blocks), remasking.py and prior.py. The rules, applied by keeper.py as each
step's characters are drawn: lexicon.py (real_words), layout.py with casts.py, quotes.py and line_length.py
(keep_cast).

`mdlm_hf.sample` (mdlm_hf/pipeline.py) checks a run and hands it to the writer of the model's kind: `loop.py`'s, or
mdlm_hf/autoregressive.py's for a causal model, which draws with `drawing.py` and `keeper.py` too.
"""
