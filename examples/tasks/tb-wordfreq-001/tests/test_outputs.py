"""Checks /app/wordfreq.py from outside, as a user runs it."""

import subprocess

PROGRAM = "/app/wordfreq.py"


def run(tmp_path, text, *args):
    path = tmp_path / "input.txt"
    path.write_text(text, encoding="utf-8")
    out = subprocess.run(
        ["python3", PROGRAM, str(path), *args],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.splitlines()


def test_words_are_counted_without_case(tmp_path):
    assert run(tmp_path, "The cat saw the dog. THE END\n", "1") == ["the 3"]


def test_ties_are_in_alphabetical_order(tmp_path):
    text = "pear apple fig apple pear fig kiwi\n"
    assert run(tmp_path, text, "4") == ["apple 2", "fig 2", "pear 2", "kiwi 1"]


def test_the_report_example(tmp_path):
    text = "The cat saw the dog. THE END\n"
    assert run(tmp_path, text, "3") == ["the 3", "cat 1", "dog 1"]


def test_default_is_ten_words(tmp_path):
    text = " ".join(f"w{chr(97 + i)}" * 1 for i in range(12)) + "\n"
    assert len(run(tmp_path, text)) == 10
