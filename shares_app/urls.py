from __future__ import annotations

from django.urls import path

from shares_app import views

urlpatterns = [
    path("s/<session_id:session_id>/share", views.share_session, name="share_session"),
    path("share-links/<uuid:link_id>/<str:action>", views.link_action, name="share_link_action"),
    path("share/<str:token>/", views.shared, name="shared_session"),
]
