"""Admin confined to the operator's organizations (memory/admin/__init__.py uses these).

A superuser sees and changes everything. A staff member who is not one sees only the rows
of the organizations they are a member of, whatever model permissions they hold:

* every list and every change, delete and history page is filtered by organization: a row
  of another organization is a 404, as if it did not exist;
* the choices of a foreign key (an agent, a session, a user) and of a list filter come
  from their organizations only;
* organizations (and so their membership), agents (and so their SOUL and skills, which
  open every prompt of the organization) and groups are changed only by superusers;
* API tokens: only their own;
* in the user admin they see themselves and the non-staff members of their organizations,
  and can never set ``is_superuser``, ``is_staff``, groups or permissions.
"""

from __future__ import annotations

from django.contrib import admin
from django.contrib.admin.utils import get_fields_from_path
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import GroupAdmin, UserAdmin
from django.contrib.auth.models import Group
from django.db.models import Model, Q, QuerySet
from django.http import Http404
from rest_framework.authtoken.admin import TokenAdmin
from rest_framework.authtoken.models import TokenProxy

from memory.models import Agent, Organization, Session, Topic


def organizations_of(user) -> QuerySet:
    return Organization.objects.filter(members=user)


def scoped_choices(model: type[Model], user) -> QuerySet | None:
    """The rows of ``model`` a non-superuser may pick in a form, or None (no rule)."""
    orgs = organizations_of(user)
    if model is Organization:
        return orgs
    if model is Agent or model is Session:
        return model.objects.filter(organization__in=orgs)
    if model is Topic:
        return Topic.objects.filter(session__organization__in=orgs)
    if model is get_user_model():
        return model.objects.filter(Q(organizations__in=orgs) | Q(pk=user.pk)).distinct()
    return None


class OrganizationScoped:
    """A ModelAdmin mixin: ``organization_path`` leads from the row to its organization."""

    organization_path = "organization"

    def get_queryset(self, request):
        queryset = super().get_queryset(request)
        if request.user.is_superuser:
            return queryset
        return queryset.filter(**{f"{self.organization_path}__in": organizations_of(request.user)})

    def get_object(self, request, object_id, from_field=None):
        obj = super().get_object(request, object_id, from_field)
        if obj is None and not request.user.is_superuser:
            raise Http404("No such row in your organizations.")
        return obj

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        if not request.user.is_superuser:
            choices = scoped_choices(db_field.related_model, request.user)
            if choices is not None:
                kwargs["queryset"] = choices
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def get_list_filter(self, request):
        filters = super().get_list_filter(request)
        if request.user.is_superuser:
            return filters
        return [_related_only(self.model, item) for item in filters]


def _related_only(model, item):
    """A relation's list filter offers only the values present in the (scoped) rows."""
    if isinstance(item, str) and get_fields_from_path(model, item)[-1].is_relation:
        return (item, admin.RelatedOnlyFieldListFilter)
    return item


class SuperuserChanges:
    """A ModelAdmin mixin: only superusers add, change or delete (staff may view)."""

    def has_add_permission(self, request, *args):
        return request.user.is_superuser and super().has_add_permission(request, *args)

    def has_change_permission(self, request, obj=None):
        return request.user.is_superuser and super().has_change_permission(request, obj)

    def has_delete_permission(self, request, obj=None):
        return request.user.is_superuser and super().has_delete_permission(request, obj)


class AuditTrail:
    """A ModelAdmin mixin for records the system writes (decisions, deletions, runs): they
    are viewed, never added or edited by hand."""

    def has_add_permission(self, request, *args):
        return False

    def has_change_permission(self, request, obj=None):
        return False


class KeptAuditTrail(AuditTrail):
    """...nor deleted: what they record must outlive what it was about."""

    def has_delete_permission(self, request, obj=None):
        return False


_PRIVILEGES = ("is_superuser", "is_staff", "groups", "user_permissions")


class ConfinedUserAdmin(UserAdmin):
    def get_queryset(self, request):
        queryset = super().get_queryset(request)
        if request.user.is_superuser:
            return queryset
        members = Q(organizations__in=organizations_of(request.user), is_staff=False)
        return queryset.filter(members | Q(pk=request.user.pk)).distinct()

    def get_object(self, request, object_id, from_field=None):
        obj = super().get_object(request, object_id, from_field)
        if obj is None and not request.user.is_superuser:
            raise Http404("No such user in your organizations.")
        return obj

    def get_readonly_fields(self, request, obj=None):
        fields = tuple(super().get_readonly_fields(request, obj))
        return fields if request.user.is_superuser else fields + _PRIVILEGES

    def has_change_permission(self, request, obj=None):
        """An operator changes a user (the password included) only when the user belongs
        to no organization outside the operator's: a member shared with an organization
        the operator does not administer is out of reach (set her password, then log in
        as her and read that organization's sessions)."""
        if not super().has_change_permission(request, obj):
            return False
        return obj is None or beyond_reach(request.user, obj) is False


def beyond_reach(operator, user) -> bool:
    """Whether ``user`` belongs to an organization ``operator`` does not (a superuser and
    the operator themselves: never)."""
    if operator.is_superuser or operator.pk == user.pk:
        return False
    return user.organizations.exclude(pk__in=organizations_of(operator)).exists()


class OperatorActions:
    """Admin actions held to Django's permissions (``@admin.action(permissions=[...])``):
    starting or undoing a consolidation changes topics and facts; exporting a user's
    memory hands out their messages. Viewing is not enough for either."""

    def has_consolidate_permission(self, request) -> bool:
        return request.user.has_perms(["memory.change_topic", "memory.change_importantinfo"])

    def has_export_permission(self, request) -> bool:
        return request.user.has_perms(["memory.change_session", "memory.view_message"])


class ConfinedGroupAdmin(SuperuserChanges, GroupAdmin):
    pass


class ConfinedTokenAdmin(TokenAdmin):
    """API tokens are credentials: a non-superuser sees only their own."""

    def get_queryset(self, request):
        queryset = super().get_queryset(request)
        return queryset if request.user.is_superuser else queryset.filter(user=request.user)

    def get_object(self, request, object_id, from_field=None):
        obj = super().get_object(request, object_id, from_field)
        if obj is None and not request.user.is_superuser:
            raise Http404("No such token of yours.")
        return obj

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        if db_field.name == "user" and not request.user.is_superuser:
            kwargs["queryset"] = get_user_model().objects.filter(pk=request.user.pk)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)


def confine_auth_admin(site: admin.AdminSite) -> None:
    """Replace the user and group admins with the confined ones."""
    user_model = get_user_model()
    for model, model_admin in (
        (user_model, ConfinedUserAdmin),
        (Group, ConfinedGroupAdmin),
        (TokenProxy, ConfinedTokenAdmin),
    ):
        if site.is_registered(model):
            site.unregister(model)
        site.register(model, model_admin)
