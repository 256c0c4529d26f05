"""The admin's name for the site: Parley's, in every page's title, header and login page."""

from __future__ import annotations

from django.contrib import admin

admin.site.site_header = "Parley"
admin.site.site_title = "Parley admin"
admin.site.index_title = "Parley administration"
