"""load_reference_rows: the published docs/campaigns.md tables, idempotent, all-or-nothing on bad input."""

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from benchhub.results.published import ReferenceRow

pytestmark = pytest.mark.django_db


def test_it_loads_the_published_seed_tables() -> None:
    out = StringIO()
    call_command("load_reference_rows", stdout=out)
    assert "19 created, 0 updated" in out.getvalue()
    m5 = ReferenceRow.objects.get(chip="Apple M5 Pro", model_label="Qwen3-1.7B UD-IQ2_XXS", batch_size=4)
    assert (m5.baseline_tg_tps, m5.tg_tps) == (148.0, 209.9)
    assert round(m5.speedup, 2) == 1.42
    ultra = ReferenceRow.objects.for_campaign("few-row-mma").get(batch_size=8)
    assert (ultra.chip, ultra.gpu_cores, ultra.tg_tps) == ("Apple M3 Ultra", 60, 119.7)
    assert ReferenceRow.objects.filter(chip="Apple M1").count() == 3


def test_it_updates_instead_of_duplicating_when_run_again() -> None:
    call_command("load_reference_rows", stdout=StringIO())
    out = StringIO()
    call_command("load_reference_rows", stdout=out)
    assert "0 created, 19 updated" in out.getvalue()
    assert ReferenceRow.objects.count() == 19


def test_it_shows_rows_without_core_count_on_every_binning_of_the_chip() -> None:
    call_command("load_reference_rows", stdout=StringIO())
    assert ReferenceRow.objects.for_chip("Apple M5 Pro", 20).count() == 11
    assert ReferenceRow.objects.for_chip("Apple M3 Ultra", 60).count() == 5
    assert ReferenceRow.objects.for_chip("Apple M3 Ultra", 80).count() == 0


def test_it_refuses_a_bad_row_with_one_sentence_and_writes_nothing(tmp_path: Path) -> None:
    good = {
        "campaign": "mv-ext-iquants",
        "chip": "Apple M2",
        "gpu_cores": 10,
        "machine": "M2",
        "model": "m",
        "quant": "IQ2_XXS",
        "baseline": "upstream",
        "variant": "01",
        "source": "s",
        "rows": [[4, 50.0, 60.0]],
    }
    bad = {**good, "machine": "M2 other", "rows": [[4, 50.0, -1]]}
    path = tmp_path / "rows.json"
    path.write_text(json.dumps({"tables": [good, bad]}))
    with pytest.raises(CommandError, match=r"tables\[1\]: rows\[0\] must be"):
        call_command("load_reference_rows", str(path))
    assert ReferenceRow.objects.count() == 0


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "is not valid JSON"),
        ('{"tables": {}}', "must hold an object with a 'tables' list"),
        ('{"tables": [{"campaign": ""}]}', "tables[0]: 'campaign' must be a non-empty string"),
    ],
)
def test_it_names_what_is_wrong_with_a_malformed_file(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "rows.json"
    path.write_text(content)
    with pytest.raises(CommandError) as error:
        call_command("load_reference_rows", str(path))
    assert message in str(error.value)


def test_it_reports_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="cannot read"):
        call_command("load_reference_rows", str(tmp_path / "absent.json"))
