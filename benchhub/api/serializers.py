"""Output serializers (reads) and the documentation-only shape of a DSSE envelope (writes are
verified byte for byte by benchhub.results.ingest, never by a serializer)."""

from __future__ import annotations

from typing import Any, ClassVar

from benchhub_protocol import words
from django.urls import reverse
from drf_spectacular.utils import extend_schema_serializer
from rest_framework import serializers

from benchhub.api import examples
from benchhub.results import board
from benchhub.results.models import LeaderboardCell, Measurement, Submission, SubmissionVariant
from benchhub.results.published import ReferenceRow


class SignatureSerializer(serializers.Serializer[Any]):
    keyid = serializers.CharField(help_text="lowercase hex SHA-256 of the raw 32-byte public key")
    sig = serializers.CharField(help_text="standard base64 of the 64-byte Ed25519 signature over PAE")


class EnvelopeSerializer(serializers.Serializer[Any]):
    payloadType = serializers.CharField()
    payload = serializers.CharField(help_text="standard base64 of the RFC 8785 canonical payload bytes")
    signatures = SignatureSerializer(many=True)


@extend_schema_serializer(examples=examples.REGISTERED)
class RegistrationResponseSerializer(serializers.Serializer[Any]):
    handle = serializers.CharField()
    keyid = serializers.CharField()


@extend_schema_serializer(examples=examples.CREATED)
class SubmissionCreatedSerializer(serializers.Serializer[Any]):
    id = serializers.UUIDField()
    url = serializers.URLField(help_text="the submission's web page")
    status = serializers.ChoiceField(choices=Submission.Status.choices)
    counts_from = serializers.DateTimeField(
        allow_null=True,
        help_text="When the signing key leaves probation and the result enters the cells; null when it counts now.",
    )


class WithdrawnSerializer(serializers.Serializer[Any]):
    id = serializers.UUIDField()
    status = serializers.CharField(help_text="withdrawn")
    withdrawn_at = serializers.DateTimeField()


@extend_schema_serializer(examples=examples.ERROR)
class ErrorSerializer(serializers.Serializer[Any]):
    error = serializers.CharField(help_text="machine code")
    detail = serializers.CharField(help_text="human sentence")
    field = serializers.CharField(required=False, help_text="the input field at fault, as a dotted path")


class SnapshotIndexSerializer(serializers.Serializer[Any]):
    file = serializers.CharField(help_text="the snapshot file's name (GET /api/v1/snapshot/ serves it)")
    sha256 = serializers.CharField(help_text="hex SHA-256 of the file's bytes, as the gzipped body is served")
    size_bytes = serializers.IntegerField()
    generated_at = serializers.DateTimeField(help_text="every submission received by then is in it")
    submissions = serializers.IntegerField(help_text="how many submission lines it holds")


@extend_schema_serializer(examples=examples.MEASUREMENT)
class MeasurementSerializer(serializers.ModelSerializer[Measurement]):
    submission = serializers.UUIDField(source="submission_id")
    campaign: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    contributor: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(slug_field="handle", read_only=True)
    variant = serializers.CharField(source="variant_name")

    class Meta:
        model = Measurement
        fields = (
            "submission",
            "campaign",
            "contributor",
            "chip",
            "gpu_cores",
            "model_sha256",
            "quant",
            "backend",
            "variant",
            "commit",
            "batch_size",
            "n_rounds",
            "n_cycles",
            "tg_tps",
            "baseline_tg_tps",
            "speedup",
            "log_se",
            "correctness_status",
            "excluded_reason",
        )


class VariantSerializer(serializers.ModelSerializer[SubmissionVariant]):
    correctness = serializers.SerializerMethodField()
    generation = serializers.SerializerMethodField()

    class Meta:
        model = SubmissionVariant
        fields = ("name", "commit", "patches", "env", "correctness", "generation")

    def get_correctness(self, variant: SubmissionVariant) -> list[dict[str, Any]]:
        return [
            {"backend": c.backend, "status": c.status, "passed": c.passed, "failed": c.failed, "reason": c.reason}
            for c in variant.correctness.all()
        ]

    def get_generation(self, variant: SubmissionVariant) -> list[dict[str, Any]]:
        return [
            {
                "prompt_id": g.prompt_id,
                "n_tokens": g.n_tokens,
                "output_sha256": g.output_sha256,
                "degenerate": g.degenerate,
                "repetition_score": g.repetition_score,
                "identical_to_baseline": g.identical_to_baseline,
            }
            for g in variant.generation.all()
        ]


class SubmissionSerializer(serializers.ModelSerializer[Submission]):
    campaign: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    contributor: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(slug_field="handle", read_only=True)
    keyid = serializers.CharField(source="key.keyid")
    machine = serializers.SerializerMethodField()
    model = serializers.SerializerMethodField()
    envelope_url = serializers.SerializerMethodField()
    state = serializers.CharField(read_only=True, help_text="counted, hidden (see state_reason) or withdrawn")
    state_reason = serializers.SerializerMethodField(help_text="why; a moderator's reason stays beside a withdrawal")

    class Meta:
        model = Submission
        fields: tuple[str, ...] = (
            "id",
            "campaign",
            "contributor",
            "keyid",
            "status",
            "flags",
            "state",
            "state_reason",
            "withdrawn_at",
            "hidden",
            "is_demo",
            "created_at",
            "received_at",
            "machine",
            "model",
            "power_source",
            "low_power_mode",
            "thermal",
            "envelope_url",
        )

    def get_state_reason(self, submission: Submission) -> str:
        return submission.state_reason

    def get_machine(self, submission: Submission) -> dict[str, Any]:
        m = submission.machine
        return {
            "os": m.os,
            "os_version": m.os_version,
            "arch": m.arch,
            "chip": m.chip,
            "gpu_name": m.gpu_name,
            "gpu_cores": m.gpu_cores,
            "cpu_cores_performance": m.cpu_cores_performance,
            "cpu_cores_efficiency": m.cpu_cores_efficiency,
            "memory_bytes": m.memory_bytes,
            "backend": m.backend,
        }

    def get_model(self, submission: Submission) -> dict[str, Any]:
        f = submission.model_file
        return {
            "sha256": f.sha256,
            "file_name": f.file_name,
            "label": f.label,
            "architecture": f.architecture,
            "n_params": f.n_params,
            "file_type": f.file_type,
            "size_bytes": f.size_bytes,
        }

    def get_envelope_url(self, submission: Submission) -> str:
        request = self.context["request"]
        return str(request.build_absolute_uri(reverse("api-submission-envelope", args=[submission.id])))


class SubmissionDetailSerializer(SubmissionSerializer):
    variants = VariantSerializer(many=True, read_only=True)
    measurements = MeasurementSerializer(many=True, read_only=True)

    class Meta(SubmissionSerializer.Meta):
        fields = (*SubmissionSerializer.Meta.fields, "llama_cpp", "sweep_settings", "variants", "measurements")


class ExcludedSerializer(serializers.Serializer[Any]):
    hidden = serializers.IntegerField(help_text="hidden by a moderator")
    withdrawn = serializers.IntegerField(help_text="withdrawn by its contributor")
    held = serializers.IntegerField(help_text="held in quarantine (implausible numbers) or for a model-file conflict")
    correctness_failed = serializers.IntegerField()
    correctness_not_run = serializers.IntegerField(help_text="a check that did not run is never a pass")
    degenerate_output = serializers.IntegerField(help_text="the variant's output loops while the baseline's is clean")
    run_state = serializers.IntegerField(help_text="on battery, low power mode or thermal pressure")


# What each row field is (docs/protocol.md section 7, cells version 4): the OpenAPI document says it beside the field.
ROW_HELP = {
    "chip": "the chip as the machines report it",
    "gpu_cores": "GPU core count; null off Apple GPUs",
    "model": "display name of the model file (its label, else its file name); two files may share one",
    "model_sha256": "sha256 of the GGUF file: what tells model files apart",
    "quant": "the file's file_type, e.g. IQ2_XXS",
    "variant": "the campaign's variant name",
    "commit": "the commit the variant was built from: the one its campaign version pins",
    "batch_size": "decode batch size",
    "baseline_tg_tps": "the typical machine's baseline decode t/s",
    "tg_tps": "baseline_tg_tps x speedup, so the three numbers shown always agree",
    "speedup": "estimate of the typical machine's ratio variant / baseline (a submission's over whole rotation "
    "cycles, machines combined as studies with random effects)",
    "ci_low": "lower end of the interval named by `interval`",
    "ci_high": "upper end of the interval named by `interval`",
    "predict_low": "lower end of where one more machine of this chip is expected to fall, at predict_level",
    "predict_high": "upper end of where one more machine of this chip is expected to fall, at predict_level",
    "predict_level": "share of machines the prediction range is meant to hold, e.g. 0.8; null with none",
    "tau": "spread of the true effects between machines: the standard deviation of their log ratios "
    "(random effects, DerSimonian-Laird); null below 3 machines",
    "i2": "share of the machines' spread that is between machines rather than measurement noise (I^2, 0 to 1); "
    "null below 3 machines",
    "min_effect": f"the campaign's smallest effect worth reporting, as a fraction ({words.DEFAULT_MIN_EFFECT:g} unless "
    "the campaign says otherwise)",
    "n_machines": "machines counted: a machine is a registered key, however many submissions it sent",
    "n_submissions": "submissions counted",
    "n_contributors": "handles counted (one handle may hold several keys, one per machine)",
    "n_pending": "machines whose keys are still on probation: their rows enter the cell when it ends",
    "backend": "the backend the rows ran on (metal, cuda, cpu...)",
    "control": "true where the campaign's patches do not touch this backend: an A/A control, not evidence",
    "campaign_version": "the campaign version whose measurement the cell holds (the earliest since which commits, "
    "patches, env and sweep are unchanged)",
    "superseded": "true where a newer campaign version measures something else: shown apart, never pooled or ranked",
}


class LeaderboardRowSerializer(serializers.ModelSerializer[LeaderboardCell]):
    """One cell (docs/protocol.md section 7, cells version 4)."""

    excluded = ExcludedSerializer(help_text="rows left out of the cell, by the first reason that applies")
    interval = serializers.CharField(
        allow_null=True,
        help_text='what [ci_low, ci_high] is, in words: e.g. "95%, page-wise" (an interval for the typical '
        'machine, simultaneous over every interval of its group), "range" (lowest to highest machine, no confidence '
        "claimed); null where there is none (docs/method.md)",
    )
    verdict = serializers.ChoiceField(
        choices=list(words.VERDICTS),
        help_text="; ".join(f"{word}: {meaning}" for word, meaning in words.VERDICT_MEANINGS.items())
        + '. Pages write "within ±2%" for within at 2%. In one group (docs/protocol.md, section 7) identical code '
        "shows any faster or slower with probability at most 5%",
    )

    class Meta:
        model = LeaderboardCell
        fields = board.CELL_FIELDS
        extra_kwargs: ClassVar[dict[str, dict[str, str]]] = {
            name: {"help_text": text} for name, text in ROW_HELP.items()
        }


@extend_schema_serializer(examples=examples.LEADERBOARD)
class LeaderboardSerializer(serializers.Serializer[Any]):
    campaign = serializers.SlugField()
    baseline = serializers.CharField()
    rows = LeaderboardRowSerializer(many=True)


class ManifestPatchSerializer(serializers.Serializer[Any]):
    name = serializers.CharField()
    sha256 = serializers.CharField(allow_null=True, help_text="null while the patch file is not published")
    url = serializers.URLField(allow_null=True)


class ManifestVariantSerializer(serializers.Serializer[Any]):
    name = serializers.CharField()
    commit = serializers.CharField(allow_null=True)
    ref = serializers.CharField(
        allow_null=True, help_text="where the pinned commit came from, e.g. refs/pull/29869/head; never built as such"
    )
    available = serializers.BooleanField(help_text="false while a patch of this variant is missing or empty")
    unavailable_reason = serializers.CharField()
    patches = ManifestPatchSerializer(many=True)
    env = serializers.DictField(child=serializers.CharField())


class ManifestSerializer(serializers.Serializer[Any]):
    slug = serializers.SlugField()
    title = serializers.CharField()
    description = serializers.CharField()
    repo = serializers.URLField()
    baseline = serializers.CharField()
    variants = ManifestVariantSerializer(many=True)
    sweep = serializers.DictField(help_text="npp, ntg, flash_attn, n_gpu_layers, batch_sizes, reps, extra_args")
    correctness = serializers.DictField()
    min_effect = serializers.FloatField()
    plausible_ratio = serializers.ListField(child=serializers.FloatField())
    version = serializers.IntegerField(help_text="the campaign version's number")
    digest = serializers.CharField(help_text="sha256 of the RFC 8785 form of the signed manifest")
    state = serializers.ChoiceField(choices=["draft", "open", "superseded", "closed"])
    signature = serializers.CharField(
        allow_null=True, help_text="base64 Ed25519 by the offline campaign key over the digest; null for a draft"
    )


class CampaignVersionSerializer(serializers.Serializer[Any]):
    version = serializers.IntegerField()
    digest = serializers.CharField()
    state = serializers.ChoiceField(choices=["draft", "open", "superseded", "closed"])
    signature = serializers.CharField(allow_null=True)
    published_at = serializers.DateTimeField(allow_null=True)
    campaign_version = serializers.IntegerField(help_text="the campaign_version of its cells")
    changes = serializers.ListField(child=serializers.CharField(), help_text="what changed from the version before")
    manifest = serializers.DictField(help_text="the signed manifest")


@extend_schema_serializer(examples=examples.REFERENCE_ROW)
class ReferenceRowSerializer(serializers.ModelSerializer[ReferenceRow]):
    """A published row: the patch author's number, not signed, never in a cell."""

    campaign = serializers.CharField(source="campaign_slug")
    machine = serializers.CharField(source="machine_label")
    model = serializers.CharField(source="model_label")
    baseline = serializers.CharField(source="baseline_variant")
    speedup = serializers.FloatField(read_only=True)
    signed = serializers.SerializerMethodField(help_text="always false: nobody benchhub knows signed it")

    class Meta:
        model = ReferenceRow
        fields = (
            "campaign",
            "chip",
            "gpu_cores",
            "machine",
            "model",
            "quant",
            "baseline",
            "variant",
            "batch_size",
            "baseline_tg_tps",
            "tg_tps",
            "speedup",
            "source",
            "source_url",
            "method",
            "signed",
        )

    def get_signed(self, row: ReferenceRow) -> bool:
        return False
