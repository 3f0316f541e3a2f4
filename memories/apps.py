from django.apps import AppConfig


class MemoriesConfig(AppConfig):
    name = "memories"
    verbose_name = "Memories"

    def ready(self) -> None:
        """Plug the services that build on the write pipeline into its registries.

        Registered here, once per process, rather than by importing a module for its side
        effect: the pipeline (memories, post_write, jobs) never imports what builds on it.
        """
        from memories.models import Job
        from memories.services import jobs, post_write
        from memories.services.briefs import decisions_extract_run
        from memories.services.conflicts import conflicts_detect, conflicts_scrub_memory
        from memories.services.entities import entities_extract, entities_forget_memory
        from memories.services.memories import register_redaction_hook

        post_write.register("detect_conflicts", conflicts_detect)
        post_write.register("extract_entities", entities_extract)
        register_redaction_hook(conflicts_scrub_memory)
        register_redaction_hook(entities_forget_memory)
        jobs.register_handler(Job.Kind.EXTRACT_DECISIONS, decisions_extract_run)
