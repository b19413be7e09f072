from django.contrib import admin, messages
from django.utils.html import format_html

from hub.config import format_size
from hub.errors import HubError
from hub.mirrors import services
from hub.mirrors.models import MirrorFile, MirrorJob


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
