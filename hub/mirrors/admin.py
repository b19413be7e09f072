from django.contrib import admin, messages
from django.utils.html import format_html

from hub.config import format_size
from hub.errors import HubError
from hub.mirrors import ondemand, services
from hub.mirrors.models import MirrorFile, MirrorJob, OnDemandBlob, OnDemandRepo


@admin.register(MirrorJob)
class MirrorJobAdmin(admin.ModelAdmin):
    list_display = ("id", "repo", "source", "state", "progress", "attempts", "created_by", "created", "short_error")
    list_filter = ("state", "source_kind")
    search_fields = ("repo__name", "repo__namespace__name", "source_url", "source_repo")
    list_select_related = ("repo__namespace", "created_by")
    exclude = ("credentials", "lease", "reservation_ids")
    readonly_fields = [f.name for f in MirrorJob._meta.fields if f.name not in ("credentials", "lease",
                                                                                 "reservation_ids")]
    actions = ["retry_jobs"]

    def has_add_permission(self, request) -> bool:
        return False  # start jobs with `manage.py mirror` or POST /api/v1/mirrors

    @admin.display(description="source")
    def source(self, job: MirrorJob) -> str:
        return job.source_display

    @admin.display(description="progress")
    def progress(self, job: MirrorJob) -> str:
        p = services.job_progress(job)
        text = f"{p['files']['done']}/{p['files']['total']} files, {format_size(p['bytes']['done'])} of " \
               f"{format_size(p['bytes']['total'])}"
        if p["rate"]:
            text += f", {format_size(int(p['rate']))}/s"
        return format_html("{}", text)

    @admin.display(description="error")
    def short_error(self, job: MirrorJob) -> str:
        return (job.error[:120] + "…") if len(job.error) > 120 else job.error

    @admin.action(description="Retry / re-run the selected mirror jobs")
    def retry_jobs(self, request, queryset) -> None:
        done, busy = 0, []
        for job in queryset.select_related("repo__namespace"):
            try:
                services.do_retry(job)
                done += 1
            except HubError:
                busy.append(str(job.pk))
        if done:
            self.message_user(request, f"{done} job(s) queued again; stored files are skipped")
        if busy:
            self.message_user(request, f"still running, not retried: {', '.join(busy)}", messages.WARNING)


@admin.register(MirrorFile)
class MirrorFileAdmin(admin.ModelAdmin):
    list_display = ("job", "path", "size", "state", "fetched", "sha256")
    list_filter = ("state", "fetched")
    search_fields = ("path", "sha256")
    readonly_fields = [f.name for f in MirrorFile._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False


@admin.register(OnDemandRepo)
class OnDemandRepoAdmin(admin.ModelAdmin):
    """Catalog entries served from upstream on first use: where from, how much is here, pinning."""

    list_display = ("repo", "source", "upstream_commit_short", "local", "checked", "pinned", "short_error")
    list_filter = ("pinned",)
    search_fields = ("repo__name", "repo__namespace__name", "source_repo")
    list_select_related = ("repo__namespace",)
    readonly_fields = [f.name for f in OnDemandRepo._meta.fields if f.name != "pinned"]
    actions = ["pin_entries"]

    def has_add_permission(self, request) -> bool:
        return False  # made on the first access to a catalog entry

    @admin.display(description="upstream")
    def source(self, origin: OnDemandRepo) -> str:
        return ondemand.display(origin)

    @admin.display(description="upstream commit")
    def upstream_commit_short(self, origin: OnDemandRepo) -> str:
        return origin.upstream_commit[:12]

    @admin.display(description="on this hub")
    def local(self, origin: OnDemandRepo) -> str:
        s = ondemand.status(origin.repo) or {}
        return (f"{s.get('local_files', 0)}/{s.get('files', 0)} files, {format_size(s.get('local_bytes', 0))} of "
                f"{format_size(s.get('local_bytes', 0) + s.get('remote_bytes', 0))}")

    @admin.display(description="error")
    def short_error(self, origin: OnDemandRepo) -> str:
        return (origin.error[:120] + "…") if len(origin.error) > 120 else origin.error

    @admin.action(description="Pin: fetch all of it now (a mirror job) and never evict")
    def pin_entries(self, request, queryset) -> None:
        done, failed = 0, []
        for origin in queryset.select_related("repo__namespace"):
            try:
                ondemand.check_pin(None, origin.repo)
                done += 1
            except HubError as err:
                failed.append(f"{origin.repo.repo_id}: {err.message}")
        if done:
            self.message_user(request, f"{done} entr{'y' if done == 1 else 'ies'} pinned; mirror jobs fetch them now")
        for text in failed:
            self.message_user(request, text, messages.WARNING)


@admin.register(OnDemandBlob)
class OnDemandBlobAdmin(admin.ModelAdmin):
    list_display = ("path", "origin", "blob", "fetched", "evicted", "last_used", "fetches", "bytes_fetched", "error")
    search_fields = ("path", "blob__sha256")
    list_select_related = ("origin__repo__namespace", "blob")
    readonly_fields = [f.name for f in OnDemandBlob._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False
