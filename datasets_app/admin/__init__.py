"""Datasets in the staff console: curated from the session and run lists and transcripts,
reviewed item by item, downloaded for training.

Importing the modules registers their ModelAdmins, and (`hooks`) what datasets add to the
chat app's session, run and agent admins.
"""

from __future__ import annotations

from datasets_app.admin import datasets, hooks, items

hooks.install()

__all__ = ["datasets", "hooks", "items"]
