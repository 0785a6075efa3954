"""The lab: what a GPU window runs and what judges its models (lab/README.md), outside the product and its training.

gpu_job.py       one call on the GPU: a plan's runs trained side by side, exported, scored and packed
plans/           the plans a window runs (JSON: the runs, their steps and minutes)
distill.py       the few-pass student a plan may distil from a diffusion model
ship_check.py    on the CPU, from what the GPU returned: unpack, measure, decide, copy the winners into pretrained/
ship_unpack.py   a returned run's packed export joined and extracted, within limits
ship_recheck.py  the job's likelihoods measured again on a sample of the same text before they decide
safe_files.py    reads and writes in the returned folder: never through a link, never past a size or a depth
ship_figures.py  a candidate's figures beside its incumbent's: likelihoods, invented words, structure, speed
ship_bars.py     which figures each kind of model must beat or match to ship
redraw_samples.py  an export's model card samples drawn again, with nothing else changed
crossover.py     diffusion against its twin by characters trained, from saved models' stages or a CPU rehearsal
"""
