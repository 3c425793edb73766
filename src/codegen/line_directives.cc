/*!
 * \file line_directives.cc
 * \brief `tl.emit_line_directives`: the `#line N "file.py"` directives of the MUSA printer, as upstream prints them.
 *
 * Upstream TileLang (CodeGenCWithLineDirectives) writes a directive before every statement that has a source line,
 * and one at the function's entry naming its `def` line; it leaves a directive out only where the same one was
 * just written and nothing followed. Each statement here names its own line, else its enclosing statement's (a
 * statement a pass made without a line; upstream stamps those of a lowered tile op with the op's line and lets the
 * others drift). The directive comes before the statement's first line of code, so a statement that prints nothing
 * writes none. Within a statement, a line whose numbering would drift from the statement's line gets one too
 * (`} else {`, a multi-line call), which upstream does not write.
 */
#include <string>
#include <utility>

#include "codegen/codegen_musa.h"
#include "codegen/musa_types.h"

namespace tilelang_musa {
namespace codegen {

std::optional<UserLine> UserLineOf(const ObjectRef& node) {
  static const TypeKey span_key("ir.Span");
  static const TypeKey sequential_key("ir.SequentialSpan");
  ObjectRef span = GetField(node, "span").cast<ObjectRef>();
  if (IsA(span, sequential_key)) {  // a statement nested in a macro or a compound statement: the innermost line
    auto spans = GetField(span, "spans").cast<Array<ObjectRef>>();
    if (spans.empty()) return std::nullopt;
    span = spans[spans.size() - 1];
  }
  if (!IsA(span, span_key)) return std::nullopt;
  ObjectRef source = GetField(span, "source_name").cast<ObjectRef>();
  const int64_t line = GetField(span, "line").cast<int64_t>();
  if (!source.defined() || line <= 0) return std::nullopt;
  return std::make_pair(std::string(GetField(source, "name").cast<String>()), line);
}

void MusaPrinter::BeginFunctionLines(const ObjectRef& func) {
  if (!options_.line_directives) return;
  def_line_ = UserLineOf(func);
  if (!def_line_) return;
  user_line_ = &*def_line_;
  WriteDirective(*def_line_);  // written even if a statement's follows at once: the entry names the `def` line
}

void MusaPrinter::DirectiveBefore(const std::string& text) {
  // A closing brace carries no code of its own: it keeps the numbering of the lines before it.
  if (user_line_ == nullptr || text.find_first_not_of('}') == std::string::npos) return;
  const bool numbered = user_line_->first == presumed_file_ && user_line_->second == presumed_line_;
  const bool just_written = numbered && static_cast<int64_t>(out_.tellp()) == directive_end_;
  if ((statement_began_ && !just_written) || !numbered) WriteDirective(*user_line_);
  statement_began_ = false;
}

void MusaPrinter::WriteDirective(const UserLine& line) {
  out_ << "#line " << line.second << " " << StringLiteral(line.first) << '\n';
  presumed_file_ = line.first;
  presumed_line_ = line.second;
  directive_end_ = static_cast<int64_t>(out_.tellp());
}

}  // namespace codegen
}  // namespace tilelang_musa
