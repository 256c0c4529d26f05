"""Datasets in the staff console: curated from the session and run lists and transcripts,
reviewed item by item, downloaded for training.

Importing the modules registers their ModelAdmins.
"""

from __future__ import annotations

from datasets_app.admin import datasets, items

__all__ = ["datasets", "items"]
