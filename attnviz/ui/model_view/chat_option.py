"""The Pretrained panel's "chat template" checkbox: shown for a decoder checkpoint that has a chat
template; checked, the text is read as one user message in that template (with the assistant's turn
opened, as transformers' ``apply_chat_template``), and the model runs again when it is toggled."""

from __future__ import annotations

from PySide6.QtWidgets import QCheckBox


class ChatTemplateBox(QCheckBox):
    """Hidden until :meth:`show_for` sees a checkpoint with a chat template."""

    def __init__(self, parent=None):
        super().__init__("chat template", parent)
        self.setVisible(False)

    def show_for(self, ckpt) -> None:
        """Show the box (unchecked) for a checkpoint whose tokenizer has a chat template, hide it otherwise."""
        special = getattr(ckpt, "special_tokens", None)
        chat = getattr(special, "chat", None)
        self.blockSignals(True)
        self.setChecked(False)
        self.blockSignals(False)
        self.setVisible(chat is not None)
        if chat is not None:
            self.setToolTip(f"read the text as one user message in the model's chat template ({chat.source}), "
                            "the assistant's turn opened after it")

    def wanted(self) -> bool:
        """True when the text is to go through the chat template."""
        return not self.isHidden() and self.isChecked()
