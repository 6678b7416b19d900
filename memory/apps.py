from django.apps import AppConfig
from django.db.models.signals import post_migrate


class MemoryConfig(AppConfig):
    name = "memory"
    verbose_name = "Memory"

    def ready(self) -> None:
        post_migrate.connect(_ensure_search_index, sender=self)


def _ensure_search_index(sender, using: str, **kwargs) -> None:
    from memory.stores.search import ensure_search_index

    ensure_search_index(using=using)
