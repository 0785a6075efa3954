"""Sampling: the options of a run and the diffusion model's writer, one concept a file.

    reference.py  read this first: the sampling loop in one function, its lines [predict] [draw] [score] [count]
                  [reveal]; every module below names the line it extends
    options.py    SamplerOptions, every option once, with what it accepts and how front ends show it
    drawing.py    how each character is drawn (temperature, top-k, top-p, min-p), shared with the twin's writer
    orders.py     which masked positions go first: REVEAL_ORDERS, each order's score or plan
    schedule.py   how many each step reveals, and semi-autoregressive blocks
    remasking.py  taking back the least confident draws (remask_ratio)
    prior.py      each character's probability with nothing known (prior_weight)
    lexicon.py    keeping every word written to a word list, names capitalised (real_words)
    layout.py     keeping a play's layout and one play's cast (keep_cast)
    casts.py      each play's speakers, the casts.json keep_cast reads
    keeper.py     both rules, applied to each step's characters as they are drawn
    step.py       one denoising step: a DenoisingPass in, the revealed characters out
    loop.py       the writer: the reference's loop over windows, blocks and steps, a generator of every state
    state.py      SamplerState, what every writer yields

`mdlm_hf.sample` (mdlm_hf/pipeline.py) checks a run and hands it to the writer of the model's kind: `loop.py`'s, or
mdlm_hf/autoregressive.py's for a causal model, which draws with `drawing.py` and `keeper.py` too.
"""
