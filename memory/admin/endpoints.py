"""Model endpoints in admin: superusers declare them (never a key: the name of the
variable or file that holds it) and test them; agents pick one (memory/admin/__init__.py).

``model_profile`` is where the model profile (memory/llm/profiles.py: what a model is
good at and whether it calls tools) is shown beside a model name.
"""

from __future__ import annotations

from django.contrib import admin, messages

from memory.llm import endpoint_key
from memory.llm.probe import probe
from memory.llm.profiles import configured_profile
from memory.models import ModelEndpoint


def model_profile(name: str) -> str:
    """What the model profile says of ``name``, in a line; blank without a name."""
    if not name:
        return ""
    profile = configured_profile(name)
    tools = "every tool on every turn" if profile.tools_reliable else "tools only when asked"
    return f"{profile.kind} ({profile.family}): {tools}"


def key_source(endpoint: ModelEndpoint) -> str:
    if endpoint.api_key_env:
        return f"the server's environment variable {endpoint.api_key_env}"
    if endpoint.api_key_file:
        return f"the key file {endpoint.api_key_file}"
    return "the endpoint's key (none is configured here)"


@admin.action(description="Test connection (models, streaming, tools)")
def test_connection(modeladmin, request, queryset):
    for endpoint in queryset:
        for model in endpoint.models[:3] or [""]:
            result = probe(
                base_url=endpoint.base_url,
                api_key=endpoint_key(endpoint),
                model=model,
                key_source=key_source(endpoint),
            )
            level = messages.SUCCESS if result.ok else messages.ERROR
            modeladmin.message_user(request, f"{endpoint.name}: {result.message}", level)


@admin.register(ModelEndpoint)
class ModelEndpointAdmin(admin.ModelAdmin):
    list_display = ["name", "base_url", "model_list", "user_list", "api_key_env", "agent_count"]
    fields = [
        "name",
        "base_url",
        "model_names",
        "user_model_names",
        "api_key_env",
        "api_key_file",
        "profiles",
    ]
    readonly_fields = ["profiles"]
    actions = [test_connection]
    superusers_only = True  # tests/test_admin_scope.py: not organization-scoped, hidden instead

    # Endpoints are the deployment's (addresses inside the network, where keys are): only
    # superusers see or change them.
    def has_module_permission(self, request):
        return request.user.is_superuser

    def has_view_permission(self, request, obj=None):
        return request.user.is_superuser

    def has_add_permission(self, request):
        return request.user.is_superuser

    def has_change_permission(self, request, obj=None):
        return request.user.is_superuser

    def has_delete_permission(self, request, obj=None):
        return request.user.is_superuser

    @admin.display(description="models")
    def model_list(self, endpoint):
        return ", ".join(endpoint.models)

    @admin.display(description="users may pick")
    def user_list(self, endpoint):
        return ", ".join(endpoint.user_models) or "—"

    @admin.display(description="agents")
    def agent_count(self, endpoint):
        return endpoint.agents.count()

    @admin.display(description="model profiles")
    def profiles(self, endpoint):
        lines = [f"{name}: {model_profile(name)}" for name in endpoint.models]
        return "\n".join(line for line in lines if not line.endswith(": ")) or "—"
