"""The admin's name for the site: Parley's, in every page's title, header and login page."""

from __future__ import annotations

from django.contrib import admin

admin.site.site_header = "Parley"
admin.site.site_title = "Parley admin"
admin.site.index_title = "Parley administration"
# The menu beside every page took a quarter of a 1280 px screen from the lists; the index and
# the breadcrumbs lead to every table all the same.
admin.site.enable_nav_sidebar = False
