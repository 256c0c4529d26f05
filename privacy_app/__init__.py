"""What Parley keeps and for how long: sessions deleted after a retention period
(`purge_expired`, for cron) unless staff keep them, and a person erased on request
(`erase_user`, or the users admin's action), their usage counted on without them."""
