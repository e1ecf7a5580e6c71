"""Reads a faultline trainer recipe the way faultline-train does: the TOML file, the trainer's
defaults for keys it leaves out, then `--set section.key=value` overrides. Shared by the
benchmark's Python programs (python_gpt.py, throughput_driver.py); standard library only."""
import sys
import tomllib

# faultline-train's defaults for keys a recipe may leave out (src/trainer/train_config.hpp).
DEFAULTS = {
    "model": {"vocab_size": 256, "block_size": 64, "n_layer": 4, "n_head": 4, "n_embd": 192,
              "tied_head": True, "init_std": 0.02},
    "data": {"path": "", "tokenizer": "synth-ngram", "tokenizer_version": 1, "fraction": 1.0},
    "optim": {"lr": 3e-3, "beta1": 0.9, "beta2": 0.95, "eps": 1e-8, "weight_decay": 0.1,
              "grad_clip": 1.0},
    "schedule": {"kind": "cosine", "warmup_steps": 10, "min_lr_ratio": 0.1,
                 "decay_fraction": 0.2, "total_steps": 0},
    "train": {"steps": 100, "stop_after": 0, "batch_size": 16, "grad_accum": 1, "seed": 1234,
              "threads": 1, "log_every": 0},
}


# --------------------------------------------------------------------------------------------
# Configuration: the recipe TOML plus `--set section.key=value` overrides, like faultline-train.

def parse_literal(text):
    """A TOML literal (int, float, bool, quoted string); anything else is a bare string."""
    try:
        return tomllib.loads("v = " + text)["v"]
    except tomllib.TOMLDecodeError:
        return text


def load_config(path, overrides):
    with open(path, "rb") as f:
        recipe = tomllib.load(f)
    config = {section: dict(values) for section, values in DEFAULTS.items()}
    for section, values in recipe.items():
        if isinstance(values, dict):
            config.setdefault(section, {}).update(values)
    for assignment in overrides:
        key, sep, value = assignment.partition("=")
        section, dot, name = key.strip().partition(".")
        if not sep or not dot:
            sys.exit(f"python_gpt: malformed override '{assignment}'; write it as section.key=value")
        config.setdefault(section, {})[name] = parse_literal(value.strip())
    return config
