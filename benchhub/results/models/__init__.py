"""The results domain: campaigns, what was received (immutable) and what is derived from it, one
module a family: campaigns.py, machines.py (machines and model files), submissions.py (what was
received, its rows and measurements) and leaderboard.py (cells, headlines, groups).

Derived tables (Measurement, LeaderboardCell) can always be rebuilt from RawEnvelope rows with
`manage.py rederive_measurements` (cells alone: `manage.py rebuild_cells`); pages and the API read
cells and never aggregate raw rows per request. Every model is imported here, so that the app's
models module reaches each of them and Django registers each.
"""

from benchhub.results.models.campaigns import Campaign, CampaignVersion
from benchhub.results.models.leaderboard import CellGroup, Headline, LeaderboardCell
from benchhub.results.models.machines import FileStanding, Machine, ModelClaimDecision, ModelFile
from benchhub.results.models.submissions import (
    CorrectnessCheck,
    GenerationCheck,
    Measurement,
    RawEnvelope,
    Submission,
    SubmissionQuerySet,
    SubmissionVariant,
    SweepRow,
    SweepRun,
    time_ordered_uuid,
)
from benchhub.results.published import ReferenceRow

__all__ = [
    "Campaign",
    "CampaignVersion",
    "CellGroup",
    "CorrectnessCheck",
    "FileStanding",
    "GenerationCheck",
    "Headline",
    "LeaderboardCell",
    "Machine",
    "Measurement",
    "ModelClaimDecision",
    "ModelFile",
    "RawEnvelope",
    "ReferenceRow",  # published.py: registered with the app's models
    "Submission",
    "SubmissionQuerySet",
    "SubmissionVariant",
    "SweepRow",
    "SweepRun",
    "time_ordered_uuid",  # the migrations name it here
]
