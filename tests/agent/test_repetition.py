from __future__ import annotations

from collections.abc import Callable

from benchhub_agent.repetition import DEGENERATE_THRESHOLD, is_degenerate, repetition_score

Recorded = Callable[[str], str]


def test_it_flags_both_real_gemma_loops_as_degenerate(recorded: Recorded) -> None:
    for name in ("cpu/completion.gemma-270m-IQ2_XXS.stdout", "cpu/completion.gemma-270m-q4_k_m.stdout"):
        score = repetition_score(recorded(name))
        assert score > DEGENERATE_THRESHOLD + 0.2, (name, score)
        assert is_degenerate(score)


def test_it_does_not_flag_random_weight_gibberish_that_never_loops(recorded: Recorded) -> None:
    score = repetition_score(recorded("cuda-h200/completion-random.stdout"))
    assert score < 0.05
    assert not is_degenerate(score)


def test_it_does_not_flag_prose(recorded: Recorded) -> None:
    assert repetition_score(recorded("prose.llama-cpp-readme.txt")) < 0.05


def test_it_catches_a_loop_in_a_script_without_spaces() -> None:
    assert is_degenerate(repetition_score("海洋是" * 30))


def test_it_gives_zero_for_text_too_short_to_judge() -> None:
    assert repetition_score("") == 0.0
    assert repetition_score("one two") == 0.0
