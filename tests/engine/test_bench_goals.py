"""The benchmark's goal checks and speedup arithmetic on hand-made rows (no models)."""
from trajkit.bench.generate import goals


def _row(method, family, batch, tps, speedup, **extra):
    return {"method": method, "family": family, "batch": batch, "tokens_per_s": tps, "speedup": speedup, **extra}


def test_goals_judge_the_best_rows():
    rows = [_row("ours plain", "ours-plain", 1, 100, 1.0), _row("HF generate", "hf-plain", 1, 90, 0.9),
            _row("ours draft k=2", "ours-draft", 1, 140, 1.4, predicted_speedup=1.5, measured_over_predicted=0.93),
            _row("ours draft k=3", "ours-draft", 1, 160, 1.6, predicted_speedup=2.0, measured_over_predicted=0.8),
            _row("HF assisted k=3", "hf-assisted", 1, 120, 1.2),
            _row("ours plain", "ours-plain", 8, 400, 1.0), _row("HF generate", "hf-plain", 8, 420, 1.05),
            _row("ours draft k=2", "ours-draft", 8, 380, 0.95)]
    got = {g["goal"]: g["met"] for g in goals(rows)}
    assert got == {"B=1: ours plain >= HF generate": True, "B=1: speculative >= 1.5x ours plain": True,
                   "B=1: measured >= 0.9x predicted": False,  # judged on the fastest draft row (k=3)
                   "B=1: speculative faster than HF assisted": True,
                   "B=8: ours plain >= HF generate": False, "B=8: speculative faster than plain": False}
