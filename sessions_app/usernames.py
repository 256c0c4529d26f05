"""The rules for usernames: Django's for people who sign up; the same and ':' for accounts.

An account an import makes is named `agno:alice`: no one can sign up under such a name before
the import makes it, while the admin (which checks the model's rule) still edits it.
"""

from __future__ import annotations

from django.contrib.auth.validators import UnicodeUsernameValidator
from django.utils.deconstruct import deconstructible
from django.utils.translation import gettext_lazy as _

# What sign-up checks, beside the model's rule below.
SIGN_UP_RULE = UnicodeUsernameValidator()


@deconstructible
class AccountUsernameValidator(UnicodeUsernameValidator):
    regex = r"^[\w.@+:-]+\Z"
    message = _(
        "Enter a valid username. This value may contain only letters, numbers, and @/./+/-/_/: "
        "characters (':' only in accounts made by an import)."
    )
