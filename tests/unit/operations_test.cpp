// The operation tables (api/operations.h; CloudWatch's and STS's own) against what they must
// agree with: each service's embedded AWS model, the authorization and audit columns of every
// row, and docs/api-coverage.md, which must list exactly the operations served.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "api/audit.h"
#include "api/cloudwatch_wire.h"
#include "api/operations.h"
#include "api/service_model.h"
#include "api/sts_api.h"

namespace ty::api {
namespace {

std::string Qualified(const OperationTable& table, std::string_view name) {
  return std::string(ActionPrefix(table.api())) + ":" + std::string(name);
}

bool Has(const std::vector<std::string>& members, std::string_view m) {
  return std::find(members.begin(), members.end(), m) != members.end();
}

TEST(OperationTables, EveryRowHasAHandlerAndAUniqueName) {
  for (const OperationTable* table : AllOperationTables()) {
    std::set<std::string_view> names;
    for (const Operation& row : table->rows()) {
      EXPECT_NE(row.handle, nullptr) << Qualified(*table, row.name);
      EXPECT_TRUE(names.insert(row.name).second) << Qualified(*table, row.name) << " has two rows";
    }
    EXPECT_FALSE(table->rows().empty());
  }
  // trainyard's own rows share Api::kTrainyard with the IAM admin rows: a name is in one of them.
  for (const Operation& own : TrainyardOperations().rows())
    EXPECT_EQ(IamAdminOperations().Find(own.name), nullptr) << own.name;
}

// A row of a service with an embedded model is one of the model's operations, and every member a
// row names (authorization, audit, condition keys) is a member of the operation's input.
TEST(OperationTables, RowsAreOperationsOfTheServicesModelAndNameItsMembers) {
  int checked = 0;
  for (const OperationTable* table : AllOperationTables()) {
    const ServiceModel* model = table->model();
    if (!model) continue;
    for (const Operation& row : table->rows()) {
      const std::string name = Qualified(*table, row.name);
      const ServiceModel::Operation* op = model->FindOperation(row.name);
      ASSERT_NE(op, nullptr) << name << " is not an operation of the embedded model";
      ++checked;
      const std::vector<std::string> members = model->MemberNames(op->input_shape);
      const OperationAccess& a = row.access;
      for (std::string_view field : {a.field, a.also_field, a.definition_roles, a.carries.member})
        if (!field.empty()) EXPECT_TRUE(Has(members, field)) << name << " names no member " << field;
      for (const AuditMember& m : row.audit) EXPECT_TRUE(Has(members, m.member)) << name << " audits no member " << m.member;
      for (const RequestKey& key : a.request_keys) {
        const std::string first(key.path.substr(0, key.path.find('.')));
        if (!key.in_carried) {
          EXPECT_TRUE(Has(members, first)) << name << " reads " << key.key << " from no member " << first;
          continue;
        }
        ASSERT_FALSE(a.carries.member.empty()) << name << " reads " << key.key << " from a request it does not carry";
        const ServiceModel& carried_model = a.carries.api == Api::kBatch ? ServiceModel::Batch() : ServiceModel::SageMaker();
        const ServiceModel::Operation* carried = carried_model.FindOperation(a.carries.operation);
        ASSERT_NE(carried, nullptr) << name << " carries " << a.carries.operation;
        EXPECT_TRUE(Has(carried_model.MemberNames(carried->input_shape), first)) << name << " " << key.key;
      }
    }
  }
  EXPECT_GE(checked, 50);
}

// Every operation that changes something is authorized on what it acts on and names it in its
// audit record. Only the operations listed here act on no one resource (checked on "*").
TEST(OperationTables, EveryMutatingRowAuthorizesAndAuditsItsResource) {
  const std::set<std::string> kAccountWide = {
      "trainyard:AdvanceClock",  // test-only: moves the server's clock
      "events:PutEvents",        // puts events on the default bus (no rule, connection or destination)
  };
  std::set<std::string> account_wide;
  for (const OperationTable* table : AllOperationTables())
    for (const Operation& row : table->rows()) {
      const std::string name = Qualified(*table, row.name);
      if (IsReadOnly(std::string(row.name))) continue;
      const OperationAccess& a = row.access;
      if (a.resource == ResourceKind::kNone) {
        account_wide.insert(name);
        EXPECT_TRUE(kAccountWide.count(name)) << name << " changes something but is authorized on no resource";
        continue;
      }
      auto audited = [&](std::string_view member) {
        return std::any_of(row.audit.begin(), row.audit.end(), [&](const AuditMember& m) { return m.member == member; });
      };
      EXPECT_TRUE(audited(a.field)) << name << " does not record " << a.field << ", the resource it is authorized on";
      if (a.also != ResourceKind::kNone) EXPECT_TRUE(audited(a.also_field)) << name << " does not record " << a.also_field;
    }
  EXPECT_EQ(account_wide, kAccountWide);
}

// ---- docs/api-coverage.md lists exactly what is served ----

std::string ReadCoverageDoc() {
  std::ifstream in(std::string(TY_SOURCE_DIR) + "/docs/api-coverage.md");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The text of the section headed "## <heading>" (to the next "## ").
std::string Section(const std::string& doc, const std::string& heading) {
  const std::string start = "\n## " + heading + "\n";
  size_t at = doc.find(start);
  if (at == std::string::npos) return "";
  at += start.size();
  return doc.substr(at, doc.find("\n## ", at) - at);
}

// The operations a section's tables name in their first column ("CancelJob, TerminateJob",
// "CreateJobQueue (container)"), header rows left out.
std::set<std::string> TableOperations(const std::string& section) {
  std::set<std::string> out;
  std::istringstream lines(section);
  static const std::regex kName("[A-Z][A-Za-z0-9]+");
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("| ", 0) != 0) continue;
    std::string cell = line.substr(2, line.find(" |", 1) - 2);
    cell = cell.substr(0, cell.find(" ("));
    std::istringstream names(cell);
    for (std::string name; std::getline(names, name, ',');) {
      name.erase(0, name.find_first_not_of(' '));
      if (std::regex_match(name, kName)) out.insert(name);
    }
  }
  return out;
}

std::set<std::string> RowNames(const OperationTable& table) {
  std::set<std::string> out;
  for (const Operation& row : table.rows()) out.insert(std::string(row.name));
  return out;
}

// "missing from the doc: A, B; documented but not served: C".
std::string Difference(const std::set<std::string>& served, const std::set<std::string>& documented) {
  std::string missing, extra;
  for (const auto& s : served)
    if (!documented.count(s)) missing += (missing.empty() ? "" : ", ") + s;
  for (const auto& d : documented)
    if (!served.count(d)) extra += (extra.empty() ? "" : ", ") + d;
  return "missing from the doc: [" + missing + "]; documented but not served: [" + extra + "]";
}

TEST(CoverageDoc, ListsExactlyTheOperationsEachServiceServes) {
  const std::string doc = ReadCoverageDoc();
  ASSERT_FALSE(doc.empty()) << "docs/api-coverage.md not found under " << TY_SOURCE_DIR;
  const std::pair<const char*, const OperationTable*> kSections[] = {
      {"AWS Batch", &BatchOperations()},
      {"SageMaker", &SageMakerOperations()},
      {"CloudWatch Logs", &LogsOperations()},
      {"EventBridge", &EventBridgeOperations()},
      {"trainyard's user administration", &IamAdminOperations()},
  };
  for (const auto& [heading, table] : kSections) {
    const std::string section = Section(doc, heading);
    ASSERT_FALSE(section.empty()) << "docs/api-coverage.md has no section \"## " << heading << "\"";
    const std::set<std::string> served = RowNames(*table), documented = TableOperations(section);
    EXPECT_EQ(served, documented) << heading << ": " << Difference(served, documented);
  }
  // CloudWatch's and STS's tables, which keep their own row types (their protocols differ).
  std::set<std::string> cloudwatch, sts;
  for (const cw::Operation& row : cw::Operations()) cloudwatch.insert(std::string(row.name));
  for (std::string_view action : StsActions()) sts.insert(std::string(action));
  for (const auto& [heading, rows] : {std::pair<const char*, const std::set<std::string>*>{"CloudWatch", &cloudwatch},
                                      {"STS", &sts}}) {
    const std::set<std::string> documented = TableOperations(Section(doc, heading));
    EXPECT_EQ(*rows, documented) << heading << ": " << Difference(*rows, documented);
  }
  // trainyard's own endpoints are documented by their paths: "`POST /trainyard/v1/...`".
  const std::string own = Section(doc, "trainyard's own endpoints");
  std::set<std::string> served, documented;
  for (const Operation& row : TrainyardOperations().rows()) served.insert(std::string(row.path));
  static const std::regex kPost("`POST (/trainyard/v1/[a-z/-]+)");
  for (auto it = std::sregex_iterator(own.begin(), own.end(), kPost); it != std::sregex_iterator(); ++it)
    documented.insert((*it)[1]);
  documented.erase("/trainyard/v1/admin/iam/");  // the IAM admin table's prefix, documented apart
  EXPECT_EQ(served, documented) << "trainyard's own endpoints: " << Difference(served, documented);
}

}  // namespace
}  // namespace ty::api
